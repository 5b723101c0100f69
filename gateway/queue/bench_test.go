package queue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The dispatch benchmarks measure the core alone: 10,000 devices over 8
// partitions, 8 members with the default credit, every delivery acked at
// once. The simulated storage answers each Fetch from preallocated records,
// so what is measured (and allocated) is the group. One op is one message
// (fetched, delivered, acked, committed).
//
//	go test -run '^$' -bench BenchmarkDispatch -benchtime 2000000x -cpu 1 ./gateway/queue/

func BenchmarkDispatchPerDeviceRandom(b *testing.B) {
	benchmarkDispatch(b, OrderPerDevice, StrategyRandom)
}

func BenchmarkDispatchPerDeviceSticky(b *testing.B) {
	benchmarkDispatch(b, OrderPerDevice, StrategySticky)
}

func BenchmarkDispatchOrderingNone(b *testing.B) {
	benchmarkDispatch(b, OrderNone, StrategyRandom)
}

const (
	benchDevices    = 10000
	benchMembers    = 8
	benchPartitions = 8
)

// benchStorage produces records on demand: partition p holds the devices
// i with i%benchPartitions == p, appended round-robin.
type benchStorage struct {
	devices [benchPartitions][]string
	payload []byte
	batch   []Msg
}

func newBenchStorage(readAhead int) *benchStorage {
	s := &benchStorage{payload: make([]byte, 64), batch: make([]Msg, 0, readAhead)}
	for i := range benchDevices {
		p := i % benchPartitions
		s.devices[p] = append(s.devices[p], fmt.Sprintf("sensor-%05d", i))
	}
	return s
}

func (s *benchStorage) read(f Fetch) []Msg {
	s.batch = s.batch[:0]
	devs := s.devices[f.Partition]
	for i := range f.MaxMsgs {
		off := f.From + uint64(i)
		s.batch = append(s.batch, Msg{
			Partition: f.Partition, Offset: off, Kind: KindData,
			Device: devs[off%uint64(len(devs))], Seq: off/uint64(len(devs)) + 1,
			Data: s.payload,
		})
	}
	return s.batch
}

func benchmarkDispatch(b *testing.B, o Ordering, s Strategy) {
	cfg := DefaultConfig()
	cfg.Ordering, cfg.Strategy = o, s
	start := map[int]uint64{}
	for p := range benchPartitions {
		start[p] = 1
	}
	store := newBenchStorage(cfg.ReadAheadMsgs)
	runDispatch(b, cfg, start, store.read)
}

// runDispatch builds a group with benchMembers members, warms it up and
// measures b.N messages, each acked at once; read answers every Fetch
// (Refetch included).
func runDispatch(b *testing.B, cfg Config, start map[int]uint64, read func(Fetch) []Msg) *Group {
	g, err := New(cfg, start, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range benchMembers {
		if err := g.AddMember(MemberID(fmt.Sprintf("worker-%d", i)), DefaultCredit, now); err != nil {
			b.Fatal(err)
		}
	}
	delivered := 0
	pump := func(limit int) {
		for delivered < limit {
			rd := g.Ready()
			// rd stays valid until the next Ready, so acking while iterating is safe.
			for _, d := range rd.Deliver {
				if err := g.Ack(d.Member, d.Msg.Ref(), d.Deliveries, now); err != nil {
					b.Fatal(err)
				}
				delivered++
			}
			for _, f := range rd.Fetch {
				msgs := read(f)
				answer := g.Fetched
				if f.Refetch {
					answer = g.Refetched
				}
				if err := answer(f.Partition, msgs, f.From+uint64(len(msgs)), now); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	pump(200000) // warm up: slabs, maps and ready queues reach their steady size
	delivered = 0
	b.ReportAllocs()
	b.ResetTimer()
	pump(b.N)
	b.StopTimer()
	b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "msgs/s")
	if st := g.Stats(); st.DeadLetters != 0 || st.StaleAcks != 0 {
		b.Fatalf("unexpected dead letters or stale acks: %+v", st)
	}
	return g
}

// BenchmarkDispatchHotDevice: one partition where every other record is of
// one device, so it always has records beyond its share of the window:
// they are set aside and read again (Refetch) all the time. Each delivery is
// acked at once.
func BenchmarkDispatchHotDevice(b *testing.B) {
	cfg := DefaultConfig()
	devs := make([]string, 1000)
	for i := range devs {
		devs[i] = fmt.Sprintf("sensor-%05d", i)
	}
	payload := make([]byte, 64)
	batch := make([]Msg, 0, cfg.ReadAheadMsgs)
	read := func(f Fetch) []Msg {
		batch = batch[:0]
		for i := range f.MaxMsgs {
			off := f.From + uint64(i)
			dev := "hot"
			if off%2 == 1 {
				dev = devs[off%uint64(len(devs))]
			}
			batch = append(batch, Msg{Partition: 0, Offset: off, Kind: KindData, Device: dev, Data: payload})
		}
		return batch
	}
	if g := runDispatch(b, cfg, map[int]uint64{0: 1}, read); g.Stats().SetAside == 0 {
		b.Fatalf("nothing set aside: %+v", g.Stats())
	}
}

// BenchmarkDispatchDeviceWindow: one partition of 100 devices appended
// round-robin, a device window of 16 (the nats uplink's default): each
// device's records go out in runs to the member holding the first. Each
// delivery is acked at once.
func BenchmarkDispatchDeviceWindow(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DeviceWindow = 16
	devs := make([]string, 100)
	for i := range devs {
		devs[i] = fmt.Sprintf("sensor-%05d", i)
	}
	payload := make([]byte, 64)
	batch := make([]Msg, 0, cfg.ReadAheadMsgs)
	read := func(f Fetch) []Msg {
		batch = batch[:0]
		for i := range f.MaxMsgs {
			off := f.From + uint64(i)
			batch = append(batch, Msg{Partition: 0, Offset: off, Kind: KindData, Device: devs[off%uint64(len(devs))],
				Seq: off/uint64(len(devs)) + 1, Data: payload})
		}
		return batch
	}
	runDispatch(b, cfg, map[int]uint64{0: 1}, read)
}
