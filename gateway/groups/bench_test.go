package groups

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// ackingMember acks every delivery at once from its own goroutine, recording
// the ingest→delivery latency.
type ackingMember struct {
	reg   *Registry
	acks  chan AckHandle
	lat   []time.Duration
	mu    sync.Mutex
	count *atomic.Int64
}

func (m *ackingMember) Deliver(d *Delivery) bool {
	m.mu.Lock()
	m.lat = append(m.lat, time.Duration(time.Now().UnixNano()-d.Record.Time))
	m.mu.Unlock()
	m.acks <- d.Ack
	return true
}

// BenchmarkEndToEnd: appends through a real log (durability=interval) to 4
// in-process members acking at once; reports messages/s and the
// ingest→delivery latency p50/p99.
func BenchmarkEndToEnd(b *testing.B) {
	// saturated: 8192 appends outstanding (throughput); window-64: a light
	// load, where latency is the fsync interval plus dispatch.
	for _, window := range []int{8192, 64} {
		b.Run(fmt.Sprintf("outstanding-%d", window), func(b *testing.B) { benchEndToEnd(b, window) })
	}
}

func benchEndToEnd(b *testing.B, window int) {
	o := wal.DefaultOptions()
	o.MaxBytes = 0
	l, err := wal.Open(b.TempDir(), o, quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cfg := queue.DefaultConfig()
	reg := newRegistry(l, cfg, nil)
	var delivered atomic.Int64
	members := make([]*ackingMember, 4)
	var wg sync.WaitGroup
	for i := range members {
		m := &ackingMember{reg: reg, acks: make(chan AckHandle, 4096), count: &delivered}
		members[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range m.acks {
				reg.Ack(Ack{Handle: h, Kind: AckDone})
				delivered.Add(1)
			}
		}()
		join(b, reg, GroupKey{"telemetry.>", "bench"}, fmt.Sprint("m", i), m, 256)
	}
	recs := make([]wal.Record, 1000)
	payload := make([]byte, 150)
	for i := range recs {
		recs[i] = wal.Record{Device: fmt.Sprintf("dev-%04d", i), Source: "bench", Payload: payload}
	}
	sem := make(chan struct{}, window)
	cb := func(wal.Position, error) { <-sem }
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		l.AppendAsync(&recs[i%len(recs)], cb)
	}
	for delivered.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var lat []time.Duration
	for _, m := range members {
		lat = append(lat, m.lat...)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
	reg.Drain(time.Now().Add(time.Second))
	for _, m := range members {
		close(m.acks)
	}
	wg.Wait()
}
