package jsapi

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkLastIndexMemory reports the heap one device costs in the
// last-value index (device IDs of 13 bytes):
// go test -run '^$' -bench LastIndexMemory ./gateway/jsapi
func BenchmarkLastIndexMemory(b *testing.B) {
	const devices = 100_000
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("sensor-%06d", i)
	}
	var perDevice float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := NewLastIndex(nil, devices, quiet())
		x.mu.Lock()
		for i, id := range ids {
			x.putLocked(id, LastPos{Partition: i % 8, Offset: uint64(i), Seq: 1})
		}
		x.mu.Unlock()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perDevice = float64(after.HeapAlloc-before.HeapAlloc) / devices
		runtime.KeepAlive(x)
	}
	b.ReportMetric(perDevice, "B/device")
}

// BenchmarkLastIndexBuild times the last-value index's first reading of a
// log of 50,000 readings (150 B, 1,000 devices):
// go test -run '^$' -bench LastIndexBuild ./gateway/jsapi
func BenchmarkLastIndexBuild(b *testing.B) {
	l := benchLog(b, 50_000, 1000)
	for b.Loop() {
		x := NewLastIndex(l, 100_000, quiet())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			x.Run(ctx)
			close(done)
		}()
		for !x.Ready() {
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/record")
}
