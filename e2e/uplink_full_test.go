package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestUplinkOutageFillsLog: the uplink's upstream is down, so its group
// holds retention, while ingest goes on until wal.max_bytes (1 MiB) is hit.
// reject: publishes are refused with the documented error, counted, and
// `edgeq status` says FULL; drop_oldest: the oldest unsent records are
// dropped, counted, and `edgeq status` says so. When the upstream returns,
// the uplink sends what is left: every acked record still stored reaches the
// stream exactly once, in per-device order, and nothing but the dropped
// oldest is missing; ingest resumes.
func TestUplinkOutageFillsLog(t *testing.T) {
	for _, policy := range []string{"reject", "drop_oldest"} {
		t.Run(policy, func(t *testing.T) { uplinkOutageFillsLog(t, policy) })
	}
}

func uplinkOutageFillsLog(t *testing.T, policy string) {
	js := newJSServer(t) // not started: the outage
	n := newNode(t, uplinkYAML(js.url())+fmt.Sprintf(`wal:
  segment_size: 64KiB
  max_bytes: 1MiB
  full_policy: %s
  retention_interval: 200ms
  partitions: 2
  hot_partitions: 1
hot:
  min_rate: 1000000
`, policy))
	n.start()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const devices = 10
	pad := strings.Repeat("x", 1000)
	acked := map[string]pubAck{}
	var refusal error
	// 4,000 records of 1 KB: four times the budget.
	for i := 1; i <= 400 && refusal == nil; i++ {
		for d := 0; d < devices; d++ {
			dev := fmt.Sprintf("full-%02d", d)
			p := fmt.Sprintf("%s|%d|%s", dev, i, pad)
			a, err := request(t, nc, dev, p)
			if err != nil {
				if policy == "drop_oldest" || !strings.Contains(err.Error(), "disk budget exhausted (full_policy reject)") {
					t.Fatalf("publish %s: %v", p[:12], err)
				}
				refusal = err
				break
			}
			acked[p] = a
		}
	}
	out, err := runCmd(edgeqBin, "status", "--http", n.httpURL())
	if err != nil {
		t.Fatalf("edgeq status: %v\n%s", err, out)
	}
	switch policy {
	case "reject":
		if refusal == nil {
			t.Fatalf("4 MB into a 1 MiB budget held by a down uplink and no refusal (%d acked)", len(acked))
		}
		if v := metricValue(t, n, `edgeq_ingest_rejected_total{stage="log",reason="full"}`); v < 1 {
			t.Errorf("rejections counted: %v", v)
		}
		if !strings.Contains(out, "full_policy reject") || !strings.Contains(out, "FULL (rejecting)") {
			t.Errorf("edgeq status does not show the full log:\n%s", out)
		}
	case "drop_oldest":
		waitFor(t, "the oldest dropped", 30*time.Second, func() bool { return droppedRecords(t, n) > 0 })
		out, _ = runCmd(edgeqBin, "status", "--http", n.httpURL())
		if !strings.Contains(out, "full_policy drop_oldest") || !strings.Contains(out, "unconsumed records dropped") {
			t.Errorf("edgeq status does not show the drops:\n%s", out)
		}
	}
	if u, ok := uplinkStatus(t, n); !ok || u.State != "down" || u.Acked != 0 {
		t.Fatalf("uplink status %+v: want down, nothing acked", u)
	}

	js.start()
	js.createStream()
	waitFor(t, "the uplink to catch up", 120*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.State == "up" && u.LagRecords == 0 && u.Held == 0
	})
	msgs := js.readStream(t)
	seen := map[string]int{}
	last := map[string]int{}
	got := map[string][]int{} // device -> indexes upstream
	for _, m := range msgs {
		seen[m.payload]++
		if seen[m.payload] > 1 {
			t.Errorf("duplicate upstream: %.20s", m.payload)
			continue
		}
		f := strings.SplitN(m.payload, "|", 3)
		i, _ := strconv.Atoi(f[1])
		if i <= last[f[0]] {
			t.Fatalf("device %s: %d after %d upstream", f[0], i, last[f[0]])
		}
		last[f[0]] = i
		got[f[0]] = append(got[f[0]], i)
	}
	missing := map[string][]int{}
	nMissing := 0
	for p := range acked {
		if seen[p] == 0 {
			f := strings.SplitN(p, "|", 3)
			i, _ := strconv.Atoi(f[1])
			missing[f[0]] = append(missing[f[0]], i)
			nMissing++
		}
	}
	dropped := droppedRecords(t, n)
	switch policy {
	case "reject":
		if nMissing > 0 || dropped > 0 {
			t.Fatalf("reject lost %d acked records (%v dropped): %v", nMissing, dropped, missing)
		}
	case "drop_oldest":
		if nMissing == 0 || float64(nMissing) > dropped {
			t.Fatalf("%d acked records missing upstream, %v dropped: want some, no more than dropped", nMissing, dropped)
		}
		// The oldest went: a device's missing records are older than all
		// it has upstream but one (the record the uplink held in memory,
		// sent from there).
		for dev, ms := range missing {
			sort.Ints(ms)
			older := 0
			for _, i := range got[dev] {
				if i < ms[len(ms)-1] {
					older++
				}
			}
			if older > 1 {
				t.Errorf("device %s: %d records upstream older than a dropped one (%d): not the oldest dropped", dev, older, ms[len(ms)-1])
			}
		}
	}
	// Ingest resumes once the uplink has freed the log.
	waitFor(t, "a publish accepted again", 60*time.Second, func() bool {
		_, err := request(t, nc, "full-00", "full-00|100000|after")
		return err == nil
	})
	t.Logf("%s: %d acked, %d upstream, %d missing, %v dropped; refusal: %v", policy, len(acked), len(msgs), nMissing, dropped, refusal)
}

// droppedRecords sums edgeq_log_retention_dropped_records_total.
func droppedRecords(t testing.TB, n *node) float64 {
	var sum float64
	for p := range 3 {
		sum += max(metricValue(t, n, fmt.Sprintf(`edgeq_log_retention_dropped_records_total{partition="%d"}`, p)), 0)
	}
	return sum
}
