package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/discovery/election"
	"edgeq/gateway/apiv1"
	"edgeq/gateway/cluster"
	"edgeq/gateway/console"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/groups"
	"edgeq/gateway/hot"
	"edgeq/gateway/ingeststats"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/metrics"
	"edgeq/gateway/metrics/lint"
	"edgeq/gateway/natsserver"
	"edgeq/gateway/nodestats"
	"edgeq/gateway/nsqserver"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// The fixtures are the status snapshot of a node (nodestats), which holds
// what every component's collector writes from.
type (
	Snapshot       = nodestats.Snapshot
	Source         = nodestats.Source
	HotStats       = nodestats.HotStats
	NATSStats      = nodestats.NATSStats
	NSQStats       = nodestats.NSQStats
	JetStreamStats = nodestats.JetStreamStats
	ReasonCount    = nodestats.ReasonCount
)

// collectors are a node's collectors over a fixed snapshot, in the order of
// the node's registry (gateway/metrics.go): what a node with these stats
// serves.
func collectors(s func() *Snapshot) []metrics.Collector {
	return []metrics.Collector{
		metrics.CollectorFunc(func(w *metrics.Writer) {
			x := s()
			metrics.NodeInfo{Node: x.Node, Version: x.Version, Start: x.StartTime, Ready: func() bool { return x.Ready }}.Collect(w)
		}),
		metrics.CollectorFunc(func(w *metrics.Writer) {
			x := s()
			ingeststats.WriteMetrics(w, &ingeststats.Scrape{Sources: x.Sources, LogRejected: x.Log.Rejected,
				NATSBadDevice: x.NATS.BadDevice, Hot: x.Hot, TopDevices: x.TopDevices})
		}),
		metrics.CollectorFunc(func(w *metrics.Writer) { wal.WriteMetrics(w, &s().Log) }),
		metrics.CollectorFunc(func(w *metrics.Writer) {
			x := s()
			groups.WriteMetrics(w, &groups.Scrape{Node: x.Node, Log: &x.Log, Groups: x.Groups, Counters: x.Dispatch, Tail: x.Tail})
		}),
		metrics.CollectorFunc(func(w *metrics.Writer) { x := s(); cluster.WriteMetrics(w, x.Cluster, x.Groups, &x.Dispatch) }),
		metrics.CollectorFunc(func(w *metrics.Writer) { natsserver.WriteMetrics(w, &s().NATS) }),
		metrics.CollectorFunc(func(w *metrics.Writer) { console.WriteMetrics(w, &s().Console) }),
		metrics.CollectorFunc(func(w *metrics.Writer) { nsqserver.WriteMetrics(w, s().NSQ) }),
		metrics.CollectorFunc(func(w *metrics.Writer) { jsapi.WriteMetrics(w, &s().JetStream) }),
		metrics.CollectorFunc(func(w *metrics.Writer) {
			x := s()
			mqtt.WriteMetrics(w, x.MQTT)
			serial.WriteMetrics(w, x.Serial)
			modbus.WriteMetrics(w, x.Modbus)
			uplink.WriteMetrics(w, x.Uplinks)
		}),
		metrics.CollectorFunc(func(w *metrics.Writer) { devicemetrics.WriteMetrics(w, s().Device) }),
	}
}

// Render writes the families of every collector over s, as Render did
// before the components wrote their own.
func Render(w io.Writer, s *Snapshot) {
	mw := metrics.NewWriter(w, s.Time)
	for _, c := range collectors(func() *Snapshot { return s }) {
		c.Collect(mw)
	}
}

// RenderDevice writes device samples.
func RenderDevice(w io.Writer, samples []devicemetrics.Sample) {
	devicemetrics.WriteMetrics(metrics.NewWriter(w, time.Time{}), samples)
}

// exposition is a registry over the snapshot of its last Write.
type exposition struct {
	reg  *metrics.Registry
	snap *Snapshot
}

func NewExposition() *exposition {
	x := &exposition{}
	x.reg = metrics.NewRegistry(collectors(func() *Snapshot { return x.snap })...)
	return x
}

func (x *exposition) Write(w io.Writer, s *Snapshot) { x.snap = s; x.reg.Write(w, s.Time) }
func (x *exposition) Observe(d time.Duration)        { x.reg.Observe(d) }

// The fake Raspberry Pi 4 of the devicemetrics tests: its procfs and sysfs
// fixtures, its process, and a data dir on /dev/mmcblk0p2 of a 32 GB card.
const (
	fixtureProc = "../devicemetrics/testdata/proc"
	fixtureSys  = "../devicemetrics/testdata/sys"
)

func fixtureCollectors(t testing.TB) []devicemetrics.Collector {
	t.Helper()
	cs, err := devicemetrics.NewCollectorsOn(
		devicemetrics.Config{ProcRoot: fixtureProc, SysRoot: fixtureSys, DataDir: "/var/lib/edgeq", PID: 4242},
		devicemetrics.FakeSystem{
			Statfs: func(_ string, st *unix.Statfs_t) error {
				*st = unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 7_500_000, Bfree: 5_000_000, Bavail: 4_600_000}
				return nil
			},
			DeviceOf: func(string) (uint32, uint32, error) { return 179, 2, nil },
			PageSize: 4096,
		})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func fixtureSamples(t testing.TB) []devicemetrics.Sample {
	t.Helper()
	var failed []string
	s := devicemetrics.CollectAllWithErrors(fixtureCollectors(t), nil, func(c string, err error) {
		failed = append(failed, c+": "+err.Error())
	})
	if len(failed) > 0 {
		t.Fatalf("collectors failed on the fixtures: %v", failed)
	}
	return s
}

// missingRootSamples are what a node configured with proc/sys roots that do
// not exist collects: every collector fails.
func missingRootSamples(t testing.TB) []devicemetrics.Sample {
	t.Helper()
	missing := filepath.Join(t.TempDir(), "missing")
	cs, err := devicemetrics.NewCollectors(devicemetrics.Config{ProcRoot: missing, SysRoot: missing, DataDir: missing})
	if err != nil {
		t.Fatal(err)
	}
	return devicemetrics.CollectAll(cs, nil)
}

// latencySnapshot is a hist.Snapshot with the dispatch bounds and counts
// in every bucket.
func latencySnapshot(scale uint64) hist.Snapshot {
	s := hist.Snapshot{Bounds: groups.LatencyBounds, Counts: make([]uint64, len(groups.LatencyBounds)+1)}
	for i := range s.Counts {
		s.Counts[i] = scale * uint64(i%4)
		s.Sum += time.Duration(s.Counts[i]) * time.Millisecond
	}
	return s
}

// richSnapshot has every part filled: partitions (the last two hot), groups
// with per-partition windows, top devices, bridges with reasons, and the
// fixture device samples.
func richSnapshot(t testing.TB, partitions, ngroups int) *Snapshot {
	t.Helper()
	s := &Snapshot{
		Node: "gw-1", Version: "v1.2.3", Ready: true,
		StartTime: time.Unix(1_700_000_000, 0), Time: time.Unix(1_700_003_600, 0),
		Log: wal.Stats{Devices: 10_000, MaxDevices: 100_000, Bytes: 123_456_789, MaxBytes: 1 << 30,
			Rejected: map[string]uint64{"bad_device_id": 3, "too_large": 1, "too_many_devices": 0, "full": 7, "closed": 0}},
		Sources: []Source{{Name: "http", Msgs: 10, Bytes: 1000, Errors: 1}, {Name: "mqtt:plant", Msgs: 500, Bytes: 40_000},
			{Name: "nats", Msgs: 90_000, Bytes: 9_000_000, Errors: 2}},
		Hot:      HotStats{Enabled: true, Tracked: 10_000, Isolated: 1, Moves: 3, MoveErrors: 1},
		Dispatch: groups.Counters{RefusedDeliveries: 1, BadAcks: 2, StaleAcks: 3},
		Tail:     groups.TailStats{Subscribers: 2, Delivered: 40, Dropped: 4},
		NATS: NATSStats{Connections: 12, TotalConnections: 40, Refused: 1, AuthFailures: 2, ProtocolErrors: 3,
			InMsgs: 90_100, InBytes: 9_001_000, OutMsgs: 180_000, OutBytes: 20_000_000,
			IngestErrors: 9, BadDevice: 5, BadAcks: 2, SlowConsumers: 1, WriteTimeouts: 2, Stale: 3, ForeignAcks: 1, TLSFailures: 6, GroupsRefused: 7, PermViolations: 8,
			Closed: []ReasonCount{{Reason: "client", N: 30}, {Reason: "slow_consumer", N: 1}, {Reason: "write_timeout", N: 2}, {Reason: "stale", N: 3}, {Reason: "tls_handshake", N: 6}}},
		NSQ: &NSQStats{Connections: 2, TotalConnections: 5, Published: 100, Delivered: 90, Fin: 80, Req: 5, Touch: 3, RDY: 64, InFlight: 10,
			Errors: []ReasonCount{{Reason: "E_INVALID", N: 2}}},
		JetStream: JetStreamStats{Enabled: true, APICalls: 40, APIErrors: 2, Consumers: 3, BadPulls: 1, MsgIDs: 500, MaxMsgIDs: 100000, Duplicates: 4},
		Uplinks: []uplink.Stats{{UplinkStatus: apiv1.UplinkStatus{Name: "cloud", Type: "nats", State: "up", Connected: true, LagRecords: 12, Held: 4, Window: 64,
			OldestUnsentSeconds: 0.5, Sent: 100, Acked: 96, AckedBytes: 9600, Failed: 2, Retried: 2}, Latency: latencySnapshot(1)}},
		Device: fixtureSamples(t),
	}
	for p := range partitions {
		s.Log.Partitions = append(s.Log.Partitions, wal.PartitionStats{
			Partition: p, Hot: p >= partitions-2, First: 1, Last: uint64(1000 * (p + 1)), Durable: uint64(1000*(p+1) - 5),
			Bytes: int64(100_000 * (p + 1)), Appends: uint64(1000 * (p + 1)), AppendBytes: uint64(90_000 * (p + 1)),
			Batches: 400, Fsyncs: 300, Corrupt: uint64(p % 2), Dropped: 10, DroppedBytes: 1000,
			FsyncLatency: hist.Snapshot{Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond},
				Counts: []uint64{200, 90, 9, 1}, Sum: 900 * time.Millisecond},
		})
	}
	for g := range ngroups {
		gs := groups.GroupStats{
			Key:      groups.GroupKey{Filter: "telemetry.>", Queue: fmt.Sprintf("workers-%02d", g)},
			Declared: g%2 == 0,
			Core: groups.CoreStats{Members: 3, ActiveMembers: 2, InFlight: 7, Pending: 20, ActiveDevices: 9,
				Fetched: 5000, Delivered: 4800, Redeliveries: 12, Acked: 4700, Naks: 4, Terms: 1, Timeouts: 6, DeadLetters: 2,
				StallsAvoided: 3, SetAside: 400},
			Latency: latencySnapshot(uint64(g + 1)),
		}
		for p := range partitions {
			committed := uint64(1000*(p+1) - 50)
			gs.Core.Partitions = append(gs.Core.Partitions, groups.PartitionStats{Partition: p, Committed: committed, Next: committed + 31, Span: 30,
				Held: 27, Busiest: 12, SetAside: p})
		}
		s.Groups = append(s.Groups, gs)
	}
	for i := range 10 {
		s.TopDevices = append(s.TopDevices, hot.DeviceRate{Device: fmt.Sprintf("sensor-%d", i), Rate: float64(100 - i), Hot: i == 0})
	}
	s.Serial = []serial.Status{{Name: "rs485", Path: "/dev/ttyUSB0", Open: true, BytesIn: 5000, FramesIn: 100, Stored: 95,
		Dropped: map[string]uint64{"malformed": 3, "oversize": 2}, Pending: 0, Opens: 2, Reopens: 1}}
	s.MQTT = []mqtt.Status{{Name: "plant", Broker: "tcp://broker:1883", Connected: true, Subscribed: true,
		Counters: mqtt.Counters{Received: 510, Stored: 500, Acked: 500, Connects: 1,
			Unmappable: map[mqtt.Reason]uint64{mqtt.ReasonNoMatch: 4, mqtt.ReasonBadJSON: 6},
			Rejected:   map[mqtt.Reason]uint64{mqtt.ReasonTooLarge: 2},
			Dropped:    map[mqtt.Reason]uint64{mqtt.ReasonQueueFull: 1}}}}
	s.Modbus = []modbus.Status{{Latency: hist.Snapshot{Bounds: modbus.LatencyBuckets, Counts: make([]uint64, len(modbus.LatencyBuckets)+1), Sum: 40 * time.Millisecond},
		ModbusStatus: apiv1.ModbusStatus{Name: "rs485", Kind: "rtu", Address: "/dev/ttyUSB1", Open: true, Opens: 1, Stored: 40, Devices: []modbus.DeviceStatus{
			{Unit: 1, Device: "meter-1", Polls: 20, Requests: 40, LastGood: time.Unix(1_700_000_000, 0), LastLatency: 12 * time.Millisecond,
				Errors: map[string]uint64{"timeout": 0}},
			{Unit: 2, Device: "meter-2", Polls: 20, FailedPolls: 20, Requests: 60, Retries: 40,
				Errors: map[string]uint64{"timeout": 3, "exception": 20}, Exceptions: map[string]uint64{"2": 20}},
		}}}}
	s.Modbus[0].Latency.Counts[2] = 40
	return s
}

func render(s *Snapshot) []byte {
	var b bytes.Buffer
	Render(&b, s)
	return b.Bytes()
}

// compareGolden fails unless got equals the golden file (rewritten first
// with -update); a differing exposition is left in a temp file for a diff.
func compareGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		out := filepath.Join(t.TempDir(), filepath.Base(golden)+".txt")
		_ = os.WriteFile(out, got, 0o644)
		t.Errorf("exposition differs from %s; got written to %s:\n%s", golden, out, got)
	}
}

func mustLint(t testing.TB, text []byte) lint.Report {
	t.Helper()
	r := lint.Check(text, lint.Policy{Prefix: "edgeq_"})
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n--- exposition ---\n%s", err, text)
	}
	return r
}

func mustValues(t testing.TB, text []byte) map[string]float64 {
	t.Helper()
	v, err := lint.Values(text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// clusterSnapshot is node gw-b of cluster "plant" with richSnapshot's
// partitions and three groups: workers-00 led here (with two of gw-a's
// partitions, as core partitions 2048 and 2049), workers-01 led by gw-c
// (nothing of its delivery known here), workers-02 still being elected.
// Peers gw-a and gw-c are connected; gw-d is down (two addresses) and one
// discovered address never answered.
func clusterSnapshot(t testing.TB, partitions int) *Snapshot {
	t.Helper()
	s := richSnapshot(t, partitions, 3)
	s.Node = "gw-b"
	s.Device = nil
	s.Dispatch.ForwardsIn, s.Dispatch.ForwardsRefused, s.Dispatch.AcksRelayed = 300, 3, 290
	s.Dispatch.RemoteCommits, s.Dispatch.RemoteCommitFailures = 77, 1
	lead := &s.Groups[0]
	lead.Leading, lead.Forwards = true, 1200
	lead.Members = map[string]int{"gw-a": 2, "gw-b": 1}
	lead.Partitions = map[int]groups.PartitionRef{}
	for p := range partitions {
		lead.Partitions[p] = groups.PartitionRef{Node: "gw-b", Partition: p}
	}
	for p := range 2 {
		lead.Partitions[2048+p] = groups.PartitionRef{Node: "gw-a", Partition: p, Durable: uint64(500 + p)}
		lead.Core.Partitions = append(lead.Core.Partitions, groups.PartitionStats{Partition: 2048 + p, Committed: 490, Next: 495, Span: 5})
	}
	for i := 1; i < 3; i++ {
		g := &s.Groups[i]
		g.Core, g.Latency = groups.CoreStats{}, hist.Snapshot{}
	}
	s.Groups[1].Members = map[string]int{"gw-a": 1, "gw-c": 1}
	s.Groups[2].Members = map[string]int{}
	s.Cluster = &cluster.Stats{
		Name: "plant", Listen: "10.0.0.2:7420",
		Peers: []cluster.PeerStatus{
			{Node: "gw-a", Addr: "10.0.0.1:7420", Priority: 1, Partitions: 10, Dialed: true,
				Since: s.Time.Add(-time.Hour), LastSeen: s.Time.Add(-250 * time.Millisecond), QueuedBytes: 512,
				FramesIn: 1000, FramesOut: 900, BytesIn: 1_000_000, BytesOut: 90_000},
			{Node: "gw-c", Addr: "10.0.0.3:50122", Priority: 3, Partitions: 4,
				Since: s.Time.Add(-time.Minute), LastSeen: s.Time.Add(-100 * time.Millisecond),
				FramesIn: 50, FramesOut: 60, BytesIn: 5000, BytesOut: 6000},
		},
		Unreachable: []cluster.AddrStatus{
			{Addr: "10.0.0.4:7420", Node: "gw-d", Static: true},
			{Addr: "10.0.0.9:7420"},
			{Addr: "192.168.1.4:7420", Node: "gw-d"},
		},
		Manager: cluster.Counters{Refused: 4, Overflows: 1, Ups: 5, Downs: 3,
			FramesRefused: 7, HandshakesBusy: 11, HandshakeFailures: 12, Handshaking: 2},
		Election: election.Stats{Elections: 9, Leaderships: 6, TakeOvers: 2, HandOverTimeouts: 1,
			HandOvers: 3, DrainTimeouts: 0, Deposed: 2, Stale: 8, Fenced: 5},
		FencedRequests: 6,
		Leaders: map[groups.GroupKey]cluster.Leader{
			s.Groups[0].Key: {Node: "gw-b", Epoch: election.Epoch{N: 7, Leader: "gw-b"}, Self: true},
			s.Groups[1].Key: {Node: "gw-c", Epoch: election.Epoch{N: 4, Leader: "gw-c"}},
		},
	}
	return s
}
