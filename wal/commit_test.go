package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// appendWindowed appends n records over devices with at most window outstanding and
// calls check from each ack callback; it returns once all are acked.
func appendWindowed(t *testing.T, l *Log, n, devices, window int, check func(Position) error) {
	t.Helper()
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	var failed atomic.Value
	wg.Add(n)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		rec := &Record{Device: fmt.Sprintf("dev-%03d", i%devices), Source: "test", Payload: payloadFor("d", i)}
		l.AppendAsync(rec, func(pos Position, err error) {
			if err == nil && check != nil {
				err = check(pos)
			}
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
			<-sem
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("appends not acknowledged: %d outstanding", len(sem))
	}
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}
}

// An ack means: fsynced (always, interval) or written to the OS (none).
func TestCommitAckPromise(t *testing.T) {
	for _, mode := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(string(mode), func(t *testing.T) {
			o := testOptions()
			o.Durability = mode
			o.FsyncInterval = 5 * time.Millisecond
			l := openTest(t, t.TempDir(), o)
			defer l.Close()
			appendWindowed(t, l, 3000, 50, 256, func(pos Position) error {
				p := l.parts[pos.Partition]
				if d := p.durable.Load(); d < pos.Offset {
					return fmt.Errorf("acked %+v above the durable mark %d", pos, d)
				}
				if s := p.synced.Load(); mode != DurabilityNone && s < pos.Offset {
					return fmt.Errorf("acked %+v before its fsync (synced to %d)", pos, s)
				}
				return nil
			})
			c := l.Stats().Commit
			switch {
			case mode == DurabilityNone && (c.Fsyncs != 0 || c.Rounds != 0):
				t.Fatalf("durability none fsynced: %+v", c)
			case mode != DurabilityNone && (c.Rounds == 0 || c.RoundRecords != 3000 || c.Fsyncs < c.Rounds):
				t.Fatalf("commit stats after 3000 appends: %+v", c)
			}
			if c.WrittenBytes == 0 {
				t.Fatalf("no bytes written: %+v", c)
			}
		})
	}
}

// At a trickle, interval mode runs at most one fsync round per fsync_interval
// for the whole log, however many partitions the appends touch.
func TestCommitTrickleOneRoundPerInterval(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 40 * time.Millisecond
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < 400; i++ { // ~1,000/s over 40 devices, all partitions
		wg.Add(1)
		l.AppendAsync(&Record{Device: fmt.Sprintf("dev-%02d", i%40), Payload: []byte("x")}, func(_ Position, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	c := l.Stats().Commit
	// The budget: one round per interval, plus the burst it starts with.
	if limit := uint64(elapsed/o.FsyncInterval) + roundBurst; c.Rounds > limit {
		t.Fatalf("%d rounds in %v, at most %d allowed", c.Rounds, elapsed, limit)
	}
	if parts := uint64(o.TotalPartitions()); c.Fsyncs > c.Rounds*parts {
		t.Fatalf("%d fsyncs in %d rounds of %d partitions", c.Fsyncs, c.Rounds, parts)
	}
	t.Logf("%d appends in %v: %d rounds, %d fsyncs", 400, elapsed, c.Rounds, c.Fsyncs)
}

// Under load a round starts once commit_bytes are unsynced: a windowed
// publisher is not held to window / fsync_interval (here an hour).
func TestCommitBytesStartRound(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = time.Hour
	o.CommitBytes = 8 << 10
	l := openTest(t, t.TempDir(), o)
	const n, window = 5000, 64 // 64 records of ~170 bytes pass 8 KiB
	sem := make(chan struct{}, window)
	var acked atomic.Int64
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-time.After(time.Minute):
			t.Fatalf("stuck after %d acks: %+v", acked.Load(), l.Stats().Commit)
		}
		rec := &Record{Device: fmt.Sprintf("dev-%03d", i%100), Payload: payloadFor("d", i)}
		l.AppendAsync(rec, func(_ Position, err error) {
			if err != nil {
				t.Error(err)
			}
			acked.Add(1)
			<-sem
		})
	}
	// The last window's worth may stay below commit_bytes: Close syncs it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if c := l.Stats().Commit; acked.Load() != n || c.Rounds < n/window/2 {
		t.Fatalf("%d acked, commit stats: %+v", acked.Load(), c)
	}
}

// Close makes what is written durable without waiting for a round.
func TestCommitCloseFlushes(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = time.Hour
	o.CommitBytes = 64 << 20
	dir := t.TempDir()
	l := openTest(t, dir, o)
	// The first rounds (the budget's burst) took the first appends; the
	// rest wait for an hour.
	for i := 0; i < roundBurst; i++ {
		if _, err := l.Append(context.Background(), &Record{Device: "dev-a", Payload: []byte("first")}); err != nil {
			t.Fatal(err)
		}
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		l.AppendAsync(&Record{Device: fmt.Sprintf("dev-%d", i%20), Payload: []byte("x")}, func(_ Position, err error) {
			if err == nil {
				acked.Add(1)
			}
			wg.Done()
		})
	}
	time.Sleep(20 * time.Millisecond)
	if n := acked.Load(); n != 0 {
		t.Fatalf("%d appends acked before their round", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n := acked.Load(); n != 200 {
		t.Fatalf("%d of 200 acked by Close", n)
	}
	l = openTest(t, dir, o)
	defer l.Close()
	total := 0
	for p := 0; p < l.NumPartitions(); p++ {
		total += len(readAll(t, l, p))
	}
	if total != 200+roundBurst {
		t.Fatalf("%d records after reopen, want %d", total, 200+roundBurst)
	}
}

// The load rule: rounds go back to back from commit_bytes per fsync_interval
// (capped at 10ms) on, or after a burst of a quarter of it, or once
// commit_bytes are written; a trickle waits for the interval.
func TestCommitLoadRule(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		interval    time.Duration
		commitBytes int
		arrived     int64
		since       time.Duration
		want        bool
	}{
		// Defaults: 16 KiB per 10ms.
		{10 * ms, 16 << 10, 0, 0, false},
		{10 * ms, 16 << 10, 190, ms, false},           // one record just after a round
		{10 * ms, 16 << 10, 4<<10 - 1, ms, false},     // below a quarter of commit_bytes
		{10 * ms, 16 << 10, 4 << 10, ms, true},        // a burst of commit_bytes / 4
		{10 * ms, 16 << 10, 4 << 10, 5 * ms, false},   // the same bytes spread over 5ms: 0.8 MB/s
		{10 * ms, 16 << 10, 8 << 10, 5 * ms, true},    // 1.6 MB/s
		{10 * ms, 16 << 10, 1900, 10 * ms, false},     // 1,000 msg/s of 190 B
		{10 * ms, 16 << 10, 16 << 10, 10 * ms, true},  // 8,600 msg/s
		{10 * ms, 16 << 10, 100 << 10, 20 * ms, true}, // heavy load after a long round
		{10 * ms, 16 << 10, 15 << 10, 9 * ms, true},   // 16.7 KiB per 10ms
		// fsync_interval 1s: the rate rule keeps its 10ms period, so a
		// moderate stream (300 KB/s) waits for commit_bytes or the interval.
		{time.Second, 16 << 10, 3 << 10, 10 * ms, false},   // 300 KB/s
		{time.Second, 16 << 10, 15 << 10, 50 * ms, false},  // 300 KB/s, below commit_bytes
		{time.Second, 16 << 10, 16 << 10, 55 * ms, true},   // commit_bytes arrived
		{time.Second, 16 << 10, 16 << 10, 900 * ms, true},  // commit_bytes arrived, slowly
		{time.Second, 16 << 10, 4 << 10, ms, true},         // a burst of commit_bytes / 4
		{time.Second, 16 << 10, 8 << 10, 5 * ms, true},     // 1.6 MB/s is load at any interval
		{time.Second, 1 << 20, 600 << 10, 300 * ms, false}, // 2 MB/s with commit_bytes 1 MiB
		{time.Second, 1 << 20, 1 << 20, 500 * ms, true},
		{time.Second, 1 << 20, 256 << 10, ms, true}, // 256 KiB at once
		// fsync_interval 1ms: the period is the interval.
		{ms, 16 << 10, 8 << 10, ms / 2, true},
		{ms, 16 << 10, 8 << 10, ms, false},
	} {
		if got := loaded(tt.arrived, tt.since, tt.interval, int64(tt.commitBytes)); got != tt.want {
			t.Errorf("fsync_interval %v commit_bytes %d: loaded(%d bytes, %v) = %v, want %v",
				tt.interval, tt.commitBytes, tt.arrived, tt.since, got, tt.want)
		}
	}
}

// With a long fsync_interval a moderate stream is not load: rounds come once
// per interval or once commit_bytes are written, not back to back, and every
// ack still follows its fsync.
func TestCommitLongIntervalModerateStream(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 500 * time.Millisecond
	o.CommitBytes = 16 << 10
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	const n = 600
	var wg sync.WaitGroup
	var bad atomic.Value
	start := time.Now()
	for i := 0; i < n; i++ { // at most ~1,000/s of ~190 B: 190 KB/s, far below 16 KiB per 10ms
		wg.Add(1)
		l.AppendAsync(&Record{Device: fmt.Sprintf("dev-%02d", i%40), Payload: payloadFor("d", i)}, func(pos Position, err error) {
			defer wg.Done()
			if err == nil {
				if s := l.parts[pos.Partition].synced.Load(); s < pos.Offset {
					err = fmt.Errorf("acked %+v before its fsync (synced to %d)", pos, s)
				}
			}
			if err != nil {
				bad.CompareAndSwap(nil, err)
			}
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := bad.Load(); err != nil {
		t.Fatal(err)
	}
	c := l.Stats().Commit
	limit := uint64(elapsed/o.FsyncInterval) + roundBurst + c.RoundBytes/uint64(o.CommitBytes) + 1
	if c.Rounds > limit {
		t.Fatalf("%d rounds for %d bytes in %v: at most %d allowed (one per interval or per commit_bytes)", c.Rounds, c.RoundBytes, elapsed, limit)
	}
	t.Logf("%d appends (%d bytes) in %v: %d rounds, %d fsyncs", n, c.RoundBytes, elapsed, c.Rounds, c.Fsyncs)
}

// Records nobody waits for are handed back once written, start no round,
// stay invisible to readers until a round, and ride on the next waiter's
// round; alone, they are synced after lazy_sync.
func TestCommitNoWait(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 5 * time.Millisecond
	o.LazySync = time.Hour
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		rec := &Record{Device: fmt.Sprintf("dev-%02d", i%20), Payload: payloadFor("d", i), NoWait: true}
		l.AppendAsync(rec, func(pos Position, err error) {
			defer wg.Done()
			if err != nil || pos.Offset == 0 {
				t.Errorf("no-wait append: %+v, %v", pos, err)
			}
		})
	}
	wg.Wait() // handed back without any round: a round would take an hour
	if c := l.Stats().Commit; c.Rounds != 0 || c.Fsyncs != 0 {
		t.Fatalf("records nobody waits for started a round: %+v", c)
	}
	for p := 0; p < l.NumPartitions(); p++ {
		if d := l.Durable(p); d != 0 {
			t.Fatalf("partition %d durable mark %d before any round", p, d)
		}
	}
	pos, err := l.Append(context.Background(), &Record{Device: "dev-00", Payload: []byte("waits")})
	if err != nil {
		t.Fatal(err)
	}
	if l.Durable(pos.Partition) < pos.Offset {
		t.Fatalf("waiter %+v not durable", pos)
	}
	// The other partitions of the round finish their fsyncs on their own.
	deadline := time.After(time.Minute)
	for p := 0; p < l.NumPartitions(); p++ {
		for {
			ch := l.Notify(p)
			if l.Durable(p) == l.Stats().Partitions[p].Last {
				break
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("partition %d not durable after the waiter's round: %+v", p, l.Stats().Commit)
			}
		}
	}
	if c := l.Stats().Commit; c.Rounds != 1 || c.RoundRecords != 101 {
		t.Fatalf("the waiter's round: %+v, want 1 round of 101 records", c)
	}
}

// Alone, records nobody waits for are synced within lazy_sync.
func TestCommitLazySync(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.LazySync = 50 * time.Millisecond
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	done := make(chan Position, 1)
	l.AppendAsync(&Record{Device: "dev-a", Payload: []byte("x"), NoWait: true}, func(pos Position, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- pos
	})
	pos := <-done
	deadline := time.After(time.Minute)
	for {
		ch := l.Notify(pos.Partition)
		if l.Durable(pos.Partition) >= pos.Offset {
			break
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("a no-wait record not synced after a minute (lazy_sync %v): %+v", o.LazySync, l.Stats().Commit)
		}
	}
	if c := l.Stats().Commit; c.Rounds != 1 || c.Fsyncs != 1 {
		t.Fatalf("lazy sync: %+v, want one round, one fsync", c)
	}
}

// A reader waiting for records nobody waits for is a waiter: its wait starts
// a commit round (lazy_sync is an hour here), whether it started waiting
// before or after the record was written; readers still see only durable
// records.
func TestWaitReadableStartsRound(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 5 * time.Millisecond
	o.LazySync = time.Hour
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appendNoWait := func(payload string) Position {
		done := make(chan Position, 1)
		l.AppendAsync(&Record{Device: "dev-a", Payload: []byte(payload), NoWait: true}, func(pos Position, err error) {
			if err != nil {
				t.Error(err)
			}
			done <- pos
		})
		return <-done
	}
	// Written first, then a reader arrives.
	pos := appendNoWait("first")
	if l.Durable(pos.Partition) >= pos.Offset {
		t.Fatalf("a no-wait record durable before anyone waited: %+v", l.Stats().Commit)
	}
	if !l.WaitReadable(ctx, pos.Partition, pos.Offset) {
		t.Fatalf("reader not served within a minute: %+v", l.Stats().Commit)
	}
	if b, err := l.Read(pos.Partition, pos.Offset, 10, 1<<20); err != nil || len(b.Entries) != 1 || string(b.Entries[0].Record.Payload) != "first" {
		t.Fatalf("read after the reader's round: %+v, %v", b, err)
	}
	// A reader waits first, then the record is written.
	served := make(chan bool, 1)
	go func() { served <- l.WaitReadable(ctx, pos.Partition, pos.Offset+1) }()
	pt := l.parts[pos.Partition]
	for pt.readers.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("reader never registered")
		case <-time.After(time.Millisecond):
		}
	}
	next := appendNoWait("second")
	if !<-served || l.Durable(pos.Partition) < next.Offset {
		t.Fatalf("waiting reader not served: durable %d, want %d", l.Durable(pos.Partition), next.Offset)
	}
	if c := l.Stats().Commit; c.Rounds != 2 {
		t.Fatalf("rounds %d, want one per reader's wait", c.Rounds)
	}
	// A reader that gives up leaves no demand behind.
	short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	if l.WaitReadable(short, pos.Partition, next.Offset+1) {
		t.Fatal("reader served with nothing written")
	}
	if n := pt.readers.Load(); n != 0 {
		t.Fatalf("%d readers still counted after the wait ended", n)
	}
}

// Sync covers records appended before it, still queued or nobody waits
// for (lazy_sync is an hour here).
func TestSyncCoversNoWait(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.LazySync = time.Hour
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		l.AppendAsync(&Record{Device: fmt.Sprintf("dev-%02d", i%20), Payload: payloadFor("d", i), NoWait: true}, func(_ Position, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var durable uint64
	for p := 0; p < l.NumPartitions(); p++ {
		durable += l.Durable(p)
	}
	if durable != 200 {
		t.Fatalf("after Sync %d records durable, want 200", durable)
	}
	wg.Wait()
	// Nothing unsynced: Sync returns without a round.
	rounds := l.Stats().Commit.Rounds
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if r := l.Stats().Commit.Rounds; r != rounds {
		t.Fatalf("Sync with nothing unsynced ran %d rounds", r-rounds)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}
