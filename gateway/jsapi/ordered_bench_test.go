package jsapi

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/queue"
	"edgeq/wal"
)

// BenchmarkOrderedNext reads a backlog of 1,000 devices' readings (150 B)
// through an ordered consumer over every device, in pulls of 500:
// go test -run '^$' -bench OrderedNext ./gateway/jsapi
func BenchmarkOrderedNext(b *testing.B) {
	o := wal.DefaultOptions()
	o.FsyncInterval = time.Millisecond
	l, err := wal.Open(filepath.Join(b.TempDir(), "wal"), o, quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 50_000
	payload := make([]byte, 150)
	done := make(chan error, n)
	for i := range n {
		l.AppendAsync(&wal.Record{Kind: wal.KindData, Device: fmt.Sprintf("d%d", i%1000), Time: time.Now().UnixNano(), Payload: payload},
			func(_ wal.Position, err error) { done <- err })
	}
	for range n {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	reg := groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: queue.DefaultConfig(), GroupTTL: time.Hour, MaxGroups: 8}, l, quiet())
	defer reg.Drain(time.Now().Add(time.Second))
	svc := NewService(Config{Stream: "TELEMETRY", Prefix: "telemetry", Logger: quiet()}, l, reg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = ctx
	b.ResetTimer()
	read := 0
	for b.Loop() {
		out := svc.HandleFrom("CONSUMER.CREATE.TELEMETRY", []byte(`{"stream_name":"TELEMETRY","config":{"ack_policy":"none","deliver_policy":"all"}}`), 1)
		_ = out
		svc.ordered.mu.Lock()
		var c *Ordered
		for _, x := range svc.ordered.m {
			c = x
		}
		svc.ordered.mu.Unlock()
		for {
			ms, err := c.Next(500, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
			read += len(ms)
		}
		svc.removeOrdered(c)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(read), "ns/msg")
}
