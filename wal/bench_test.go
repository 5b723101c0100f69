package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	twal "github.com/tidwall/wal"
)

const (
	benchDevices = 1000
	benchPayload = 150
	benchWindow  = 8192 // appends in flight, like many publishers at once
)

func benchRecords() []Record {
	recs := make([]Record, benchDevices)
	payload := make([]byte, benchPayload)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	for i := range recs {
		// Shared read-only by concurrent appends: the log never writes a Record.
		recs[i] = Record{Device: fmt.Sprintf("sensor-%04d", i), Source: "bench", Payload: payload}
	}
	return recs
}

// BenchmarkAppend measures durable appends of 150-byte payloads over 1,000
// devices for each durability mode, and in the same run the raw batched
// tidwall/wal append of the same bytes under the same fsync policy; x-raw is
// edgeq's rate over raw's.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		b.Run(string(mode), func(b *testing.B) {
			o := DefaultOptions()
			o.Durability = mode
			o.RetentionInterval, o.CheckpointInterval = time.Hour, time.Hour
			o.MaxBytes = 0
			l, err := Open(b.TempDir(), o, quietLogger())
			if err != nil {
				b.Fatal(err)
			}
			peak := watchHeap()
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			elapsed := appendBench(b, l, benchWindow)
			b.StopTimer()
			heap := peak()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "live-heap-MiB")
			l.Close()
			raw := rawTidwallRate(b, b.N, 512, mode, o.FsyncInterval)
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "appends/s")
			b.ReportMetric(rate/raw, "x-raw")
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
		})
	}
}

// BenchmarkRawTidwallBatch256 is the floor under edgeq's durable appends: the
// same encoded records (150-byte payloads, 1,000 devices) written to one plain
// tidwall/wal log with WriteBatch of 256 entries, each batch followed by an
// fsync (scripts/bench-peers.sh runs it on the disk of the other benchmarks).
func BenchmarkRawTidwallBatch256(b *testing.B) {
	b.ReportAllocs()
	rate := rawTidwallRate(b, b.N, 256, DurabilityAlways, 0)
	b.ReportMetric(rate, "records/s")
}

// appendBench appends b.N bench records with at most window outstanding and
// returns how long it took until the last was acknowledged.
func appendBench(b *testing.B, l *Log, window int) time.Duration {
	recs := benchRecords()
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	var failed atomic.Int64
	cb := func(_ Position, err error) {
		if err != nil {
			failed.Add(1)
		}
		<-sem
		wg.Done()
	}
	start := time.Now()
	wg.Add(b.N)
	for i := 0; i < b.N; i++ {
		sem <- struct{}{}
		l.AppendAsync(&recs[i%benchDevices], cb)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		b.Fatalf("%d appends failed", failed.Load())
	}
	return elapsed
}

// rawTidwallRate appends n encoded records to one plain tidwall/wal log in
// batches of the given size with the same fsync policy and returns records
// per second.
func rawTidwallRate(b *testing.B, n, batchSize int, mode Durability, interval time.Duration) float64 {
	dir := b.TempDir()
	l, err := twal.Open(dir, &twal.Options{NoSync: true, SegmentSize: 1 << 20, SegmentCacheSize: 1, NoCopy: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := benchRecords()
	encoded := make([][]byte, len(recs))
	for i := range recs {
		r := recs[i]
		r.Kind, r.Seq, r.Time = KindData, 1, time.Now().UnixNano()
		encoded[i] = AppendRecord(nil, &r)
	}
	var batch twal.Batch
	start := time.Now()
	lastSync := start
	idx := uint64(1)
	for done := 0; done < n; {
		k := min(batchSize, n-done)
		for j := 0; j < k; j++ {
			batch.Write(idx, encoded[(done+j)%len(encoded)])
			idx++
		}
		if err := l.WriteBatch(&batch); err != nil {
			b.Fatal(err)
		}
		done += k
		switch {
		case mode == DurabilityAlways, mode == DurabilityInterval && time.Since(lastSync) >= interval:
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
			lastSync = time.Now()
		}
	}
	if mode != DurabilityNone {
		l.Sync()
	}
	return float64(n) / time.Since(start).Seconds()
}

// watchHeap samples HeapInuse every 5ms until the returned func is called,
// which returns the peak.
func watchHeap() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); <-done; return peak.Load() }
}

var (
	openFixtureOnce sync.Once
	openFixtureDir  string
	openFixtureErr  error
)

const openFixtureRecords = 1_000_000

// BenchmarkOpen measures opening a log of 1M records (8 partitions): with the
// device checkpoint a clean shutdown leaves, and with a full scan as after a
// crash before the first checkpoint.
func BenchmarkOpen(b *testing.B) {
	openFixtureOnce.Do(func() {
		openFixtureDir, openFixtureErr = os.MkdirTemp("", "edgeq-open-bench-")
		if openFixtureErr != nil {
			return
		}
		o := DefaultOptions()
		o.Durability, o.MaxBytes = DurabilityNone, 0
		l, err := Open(openFixtureDir, o, quietLogger())
		if err != nil {
			openFixtureErr = err
			return
		}
		recs := benchRecords()
		var wg sync.WaitGroup
		sem := make(chan struct{}, benchWindow)
		wg.Add(openFixtureRecords)
		for i := 0; i < openFixtureRecords; i++ {
			sem <- struct{}{}
			l.AppendAsync(&recs[i%benchDevices], func(Position, error) { <-sem; wg.Done() })
		}
		wg.Wait()
		openFixtureErr = l.Close()
	})
	if openFixtureErr != nil {
		b.Fatal(openFixtureErr)
	}
	for _, scan := range []string{"checkpoint", "full-scan"} {
		b.Run(scan, func(b *testing.B) {
			o := DefaultOptions()
			o.MaxBytes = 0
			for i := 0; i < b.N; i++ {
				if scan == "full-scan" {
					b.StopTimer()
					os.Remove(filepath.Join(openFixtureDir, checkpointFile))
					b.StartTimer()
				}
				l, err := Open(openFixtureDir, o, quietLogger())
				if err != nil {
					b.Fatal(err)
				}
				if scan == "full-scan" && l.Report().ScannedRecords < openFixtureRecords {
					b.Fatalf("scanned %d records", l.Report().ScannedRecords)
				}
				b.StopTimer()
				l.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkAppendWindow is one publisher with 256 appends outstanding (as a
// NATS publisher with 256 pub-acks in flight), or four (1,024), under
// durability interval, with the fsyncs of a round run one after the other or
// some at once.
func BenchmarkAppendWindow(b *testing.B) {
	for _, window := range []int{256, 1024} {
		for _, workers := range []int{1, 4, 10} {
			b.Run(fmt.Sprintf("window=%d/sync_workers=%d", window, workers), func(b *testing.B) {
				o := DefaultOptions()
				o.SyncWorkers = workers
				o.RetentionInterval, o.CheckpointInterval = time.Hour, time.Hour
				o.MaxBytes = 0
				l, err := Open(b.TempDir(), o, quietLogger())
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.ResetTimer()
				elapsed := appendBench(b, l, window)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
				c := l.Stats().Commit
				b.ReportMetric(float64(c.RoundRecords)/float64(max(c.Rounds, 1)), "records/round")
				b.ReportMetric(float64(c.Fsyncs)/float64(max(c.Rounds, 1)), "fsyncs/round")
			})
		}
	}
}
