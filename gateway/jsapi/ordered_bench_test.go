package jsapi

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// BenchmarkOrderedNext reads a backlog of 1,000 devices' readings (150 B)
// through an ordered consumer over every device, in pulls of 500:
// go test -run '^$' -bench OrderedNext ./gateway/jsapi
func BenchmarkOrderedNext(b *testing.B) {
	l := benchLog(b, 50_000, 1000)
	reg := groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: groups.DefaultCoreConfig(), GroupTTL: time.Hour, MaxGroups: 8}, l, quiet())
	defer reg.Drain(time.Now().Add(time.Second))
	svc := NewService(Config{Stream: "TELEMETRY", Prefix: "telemetry", Logger: quiet()}, l, reg)
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

// benchLog is a log of n readings (150 B) of devices d0..d<devices-1>.
func benchLog(b *testing.B, n, devices int) *wal.Log {
	o := wal.DefaultOptions()
	o.FsyncInterval = time.Millisecond
	l, err := wal.Open(filepath.Join(b.TempDir(), "wal"), o, quiet())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	payload := make([]byte, 150)
	done := make(chan error, n)
	for i := range n {
		l.AppendAsync(&wal.Record{Kind: wal.KindData, Device: fmt.Sprintf("d%d", i%devices), Time: time.Now().UnixNano(), Payload: payload},
			func(_ wal.Position, err error) { done <- err })
	}
	for range n {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	return l
}
