package wal

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for retention by age.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func retentionOptions() Options {
	o := testOptions()
	o.Partitions, o.HotPartitions = 1, 0
	o.SegmentSize = 64 << 10
	return o
}

func TestRetentionByBytes(t *testing.T) {
	o := retentionOptions()
	o.MaxBytes = 300 << 10 // about 4.5 segments
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	appendN(t, l, "dev", 5000) // ~800 KiB
	if err := l.Offsets().Commit("g", 0, 5000); err != nil {
		t.Fatal(err)
	}
	res, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedSegments == 0 || res.Dropped != 0 || res.Full {
		t.Fatalf("retention result %+v", res)
	}
	if l.TotalBytes() > o.MaxBytes {
		t.Fatalf("%d bytes left, budget %d", l.TotalBytes(), o.MaxBytes)
	}
	first := l.First(0)
	if first == 1 || first != res.RemovedRecords+1 {
		t.Fatalf("first offset %d after removing %d records", first, res.RemovedRecords)
	}
	b, err := l.Read(0, 1, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b.Lost != first-1 || b.Entries[0].Offset != first {
		t.Fatalf("read from 1 after retention: lost %d, first entry %d", b.Lost, b.Entries[0].Offset)
	}
}

func TestRetentionRespectsCommittedFloor(t *testing.T) {
	for _, policy := range []FullPolicy{Reject, DropOldest} {
		t.Run(string(policy), func(t *testing.T) {
			o := retentionOptions()
			o.MaxBytes = 300 << 10
			o.FullPolicy = policy
			l := openTest(t, t.TempDir(), o)
			defer l.Close()
			appendN(t, l, "dev", 5000)
			l.Offsets().Commit("slow", 0, 1000) // a consumer that is behind
			l.Offsets().Commit("fast", 0, 5000)
			res, err := l.EnforceRetention()
			if err != nil {
				t.Fatal(err)
			}
			switch policy {
			case Reject:
				if l.First(0) > 1001 || res.Dropped != 0 {
					t.Fatalf("truncated past the floor: first %d, %+v", l.First(0), res)
				}
				if !res.Full {
					t.Fatal("over budget but not full")
				}
				if _, err := l.Append(context.Background(), &Record{Device: "dev"}); !errors.Is(err, ErrFull) {
					t.Fatalf("append when full: %v", err)
				}
				// The consumer catches up: space is released, appends work again.
				l.Offsets().Commit("slow", 0, 5000)
				if res, _ = l.EnforceRetention(); res.Full {
					t.Fatal("still full after the consumer caught up")
				}
				appendN(t, l, "dev", 1)
			case DropOldest:
				if res.Dropped == 0 || l.TotalBytes() > o.MaxBytes {
					t.Fatalf("drop_oldest: %+v, %d bytes", res, l.TotalBytes())
				}
				if got := l.Stats().Partitions[0].Dropped; got != res.Dropped {
					t.Fatalf("dropped counter %d, result %d", got, res.Dropped)
				}
				// Only records the slow consumer had not committed count as dropped.
				if want := l.First(0) - 1 - 1000; res.Dropped != want {
					t.Fatalf("dropped %d, want %d", res.Dropped, want)
				}
			}
		})
	}
}

func TestRetentionByAge(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	o := retentionOptions()
	o.MaxBytes = 0
	o.MaxAge = time.Hour
	o.Now = clock.Now
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	appendN(t, l, "old", 1000) // several segments at t0
	clock.Add(2 * time.Hour)
	appendN(t, l, "new", 1000)
	res, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedSegments == 0 {
		t.Fatal("nothing removed by age")
	}
	counts := map[string]int{}
	for _, e := range readAll(t, l, 0) {
		counts[e.Record.Device]++
	}
	// Old records survive only in the segment where old and new meet.
	if counts["new"] != 1000 || counts["old"] >= 1000 || res.RemovedRecords != uint64(1000-counts["old"]) {
		t.Fatalf("after age retention: %v, result %+v", counts, res)
	}
	// A consumer that has not finished the old data holds retention back.
	l2dir := t.TempDir()
	clock2 := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	o.Now = clock2.Now
	l2 := openTest(t, l2dir, o)
	defer l2.Close()
	appendN(t, l2, "old", 1000)
	l2.Offsets().Commit("g", 0, 10)
	clock2.Add(2 * time.Hour)
	appendN(t, l2, "new", 10)
	if res, _ := l2.EnforceRetention(); res.RemovedSegments != 0 {
		t.Fatalf("age retention passed the committed floor: %+v", res)
	}
}

func TestSequenceSurvivesRetention(t *testing.T) {
	dir := t.TempDir()
	o := retentionOptions()
	o.MaxBytes = 100 << 10
	l := openTest(t, dir, o)
	appendN(t, l, "gone", 10)
	appendN(t, l, "filler", 3000)
	l.EnforceRetention()
	if l.First(0) <= 10 {
		t.Fatal("the device's records were not removed")
	}
	l.Close()
	l = openTest(t, dir, o)
	defer l.Close()
	if ps := appendN(t, l, "gone", 1); ps[0].Seq != 11 {
		t.Fatalf("seq after its records were removed: %d, want 11", ps[0].Seq)
	}
}

func TestOffsetStoreDurable(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, testOptions())
	l.Offsets().Commit("telemetry.>|uploader", 2, 77)
	l.Offsets().Commit("other", 0, 5)
	if err := l.Offsets().Flush(); err != nil {
		t.Fatal(err)
	}
	l.Offsets().Remove("other")
	l.Close() // flushes the removal
	l = openTest(t, dir, testOptions())
	defer l.Close()
	if off, ok := l.Offsets().Get("telemetry.>|uploader", 2); !ok || off != 77 {
		t.Fatalf("offset after reopen: %d %v", off, ok)
	}
	if l.Offsets().Has("other") {
		t.Fatal("removed consumer came back")
	}
	if f, ok := l.Offsets().Floor(2); !ok || f != 77 {
		t.Fatalf("floor %d %v", f, ok)
	}
	if f, _ := l.Offsets().Floor(1); f != 0 {
		t.Fatalf("floor of an uncommitted partition %d", f)
	}
}
