package metrics_test

import (
	"bytes"
	"flag"
	"strconv"
	"strings"
	"testing"

	"edgeq/gateway/cluster"
	"edgeq/gateway/groups"
	"edgeq/gateway/metrics/lint"
	"edgeq/internal/hist"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestDeviceExpositionGolden pins the exposition of the device metrics on
// the devicemetrics fixtures (a Raspberry Pi 4): every collector, HELP and
// TYPE from the library, edgeq_collector_success last. Run with -update
// after an intended change and review the diff.
func TestDeviceExpositionGolden(t *testing.T) {
	const golden = "testdata/device.golden"
	var b bytes.Buffer
	RenderDevice(&b, fixtureSamples(t))
	got := b.Bytes()
	mustLint(t, got)
	compareGolden(t, golden, got)
}

// TestRenderLints renders snapshots from empty to full and checks each with
// the linter: parseable, HELP and TYPE on every family, no duplicate
// series, histograms cumulative and ending in +Inf. Two renders of one
// snapshot are byte-identical.
func TestRenderLints(t *testing.T) {
	odd := richSnapshot(t, 2, 1)
	odd.Groups[0].Key = groups.GroupKey{Filter: `telemetry."quoted"\path`, Queue: "line\nbreak"}
	odd.Sources[0].Name = `we"ird\`
	odd.Groups[0].Latency = hist.Snapshot{} // a group whose histogram was never snapshotted
	tests := []struct {
		name       string
		snap       *Snapshot
		minSeries  int
		wantFamily []string
	}{
		{"empty", &Snapshot{}, 30, []string{"edgeq_node_info", "edgeq_ingest_rejected_total", "edgeq_log_bytes", "edgeq_nats_connections"}},
		{"one partition no groups", richSnapshot(t, 1, 0), 100, []string{"edgeq_log_fsync_duration_seconds", "edgeq_collector_success"}},
		{"8+2 partitions 10 groups", richSnapshot(t, 10, 10), 800, []string{"edgeq_group_delivery_latency_seconds", "edgeq_group_window_span", "edgeq_mqtt_unmappable_total", "edgeq_serial_dropped_total", "edgeq_top_device_messages_per_second", "edgeq_modbus_request_duration_seconds", "edgeq_modbus_device_exceptions_total", "edgeq_modbus_device_errors_total"}},
		{"escaped label values", odd, 100, []string{"edgeq_group_lag"}},
		{"missing proc and sys", &Snapshot{Device: missingRootSamples(t)}, 30, []string{"edgeq_collector_success"}},
		{"cluster", clusterSnapshot(t, 10), 300, []string{"edgeq_cluster_peer_up", "edgeq_group_members_by_node", "edgeq_group_leader"}},
		{"cluster alone", &Snapshot{Cluster: &cluster.Stats{Name: "plant"}}, 50, []string{"edgeq_cluster_info", "edgeq_cluster_remote_commits_total"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render(tt.snap)
			r := mustLint(t, got)
			if r.Series < tt.minSeries {
				t.Errorf("%d series, want at least %d", r.Series, tt.minSeries)
			}
			for _, f := range tt.wantFamily {
				if !bytes.Contains(got, []byte("\n# TYPE "+f+" ")) {
					t.Errorf("family %s missing", f)
				}
			}
			if again := render(tt.snap); !bytes.Equal(again, got) {
				t.Error("two renders of one snapshot differ")
			}
		})
	}
}

// TestRenderValues checks what the series say, including the derived ones:
// lag is durable − committed per partition, rejections add the NATS stage,
// histograms are cumulative with _count equal to +Inf.
func TestRenderValues(t *testing.T) {
	s := richSnapshot(t, 10, 3)
	v := mustValues(t, render(s))
	k := lint.Key
	g1 := []string{"filter", "telemetry.>", "queue", "workers-01"}
	lat := latencySnapshot(2) // group 1's histogram
	var cum, total uint64
	for _, c := range lat.Counts {
		total += c
	}
	tests := []struct {
		key  string
		want float64
	}{
		{k("edgeq_node_info", "node", "gw-1", "version", "v1.2.3"), 1},
		{k("edgeq_node_start_time_seconds"), 1_700_000_000},
		{k("edgeq_ingest_messages_total", "source", "nats"), 90_000},
		{k("edgeq_ingest_bytes_total", "source", "mqtt:plant"), 40_000},
		{k("edgeq_ingest_errors_total", "source", "http"), 1},
		{k("edgeq_ingest_rejected_total", "stage", "log", "reason", "full"), 7},
		{k("edgeq_ingest_rejected_total", "stage", "nats", "reason", "bad_device_id"), 5},
		{k("edgeq_log_partition_hot", "partition", "9"), 1},
		{k("edgeq_log_partition_hot", "partition", "7"), 0},
		{k("edgeq_log_partition_durable_offset", "partition", "3"), 3995},
		{k("edgeq_log_fsync_duration_seconds_bucket", "partition", "0", "le", "0.01"), 290},
		{k("edgeq_log_fsync_duration_seconds_bucket", "partition", "0", "le", "+Inf"), 300},
		{k("edgeq_log_fsync_duration_seconds_sum", "partition", "0"), 0.9},
		{k("edgeq_log_fsync_duration_seconds_count", "partition", "0"), 300},
		{k("edgeq_group_lag", append(g1, "partition", "3")...), 45}, // durable 3995 − committed 3950
		{k("edgeq_group_window_span", append(g1, "partition", "3")...), 30},
		{k("edgeq_group_window_messages", append(g1, "partition", "3")...), 27},
		{k("edgeq_group_window_busiest_device_messages", append(g1, "partition", "3")...), 12},
		{k("edgeq_group_window_set_aside", append(g1, "partition", "3")...), 3},
		{k("edgeq_group_neighbour_stalls_avoided_total", g1...), 3},
		{k("edgeq_group_set_aside_total", g1...), 400},
		{k("edgeq_group_delivered_total", g1...), 4800},
		{k("edgeq_group_acked_total", g1...), 4700},
		{k("edgeq_group_ack_timeouts_total", g1...), 6},
		{k("edgeq_group_declared", g1...), 0},
		{k("edgeq_group_delivery_latency_seconds_count", g1...), float64(total)},
		{k("edgeq_group_delivery_latency_seconds_bucket", append(g1, "le", "+Inf")...), float64(total)},
		{k("edgeq_top_device_messages_per_second", "device", "sensor-0", "isolated", "true"), 100},
		{k("edgeq_top_device_messages_per_second", "device", "sensor-9", "isolated", "false"), 91},
		{k("edgeq_nats_closed_connections_total", "reason", "stale"), 3},
		{k("edgeq_nats_closed_connections_total", "reason", "tls_handshake"), 6},
		{k("edgeq_nats_refused_group_creations_total"), 7},
		{k("edgeq_nats_permission_violations_total"), 8},
		{k("edgeq_mqtt_unmappable_total", "bridge", "plant", "reason", "bad_json"), 6},
		{k("edgeq_mqtt_connected", "bridge", "plant"), 1},
		{k("edgeq_serial_dropped_total", "port", "rs485", "reason", "oversize"), 2},
		{k("edgeq_modbus_device_exceptions_total", "bus", "rs485", "unit", "2", "device", "meter-2", "code", "2"), 20},
		{k("edgeq_modbus_device_errors_total", "bus", "rs485", "unit", "2", "device", "meter-2", "kind", "timeout"), 3},
		{k("edgeq_modbus_device_polls_total", "bus", "rs485", "unit", "1", "device", "meter-1"), 20},
		{k("edgeq_collector_success", "collector", "thermal"), 1},
		{k("edgeq_device_filesystem_avail_bytes"), 4_600_000 * 4096},
	}
	for i, b := range lat.Bounds {
		cum += lat.Counts[i]
		tests = append(tests, struct {
			key  string
			want float64
		}{k("edgeq_group_delivery_latency_seconds_bucket", append(g1, "le", strconv.FormatFloat(b.Seconds(), 'g', -1, 64))...), float64(cum)})
	}
	for _, tt := range tests {
		got, ok := v[tt.key]
		if !ok {
			t.Errorf("%s: missing", tt.key)
			continue
		}
		if got != tt.want {
			t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
		}
	}
	// Bounded cardinality: exactly the snapshot's top devices carry a
	// telemetry device ID (the disk metrics' device is the block device;
	// Modbus devices are configured ones).
	n := 0
	for key := range v {
		if strings.Contains(key, `device="`) && !strings.HasPrefix(key, "edgeq_device_disk_") && !strings.HasPrefix(key, "edgeq_modbus_device_") {
			n++
		}
	}
	if n != len(s.TopDevices) {
		t.Errorf("%d series with a device label, want the %d top devices", n, len(s.TopDevices))
	}
}
