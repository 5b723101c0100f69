package groups

import (
	"context"
	"testing"
	"time"

	"edgeq/wal"
)

// A fetcher's wait starts a commit round for records nobody waited for only
// while the group wants them (a member has credit): lazy_sync is an hour
// here, so only a reader's wait makes the record durable.
func TestReadWhenDurableDemand(t *testing.T) {
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 1, 0
	o.FsyncInterval = 2 * time.Millisecond
	o.LazySync = time.Hour
	l, err := wal.Open(t.TempDir(), o, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	written := make(chan wal.Position, 1)
	l.AppendAsync(&wal.Record{Device: "dev-a", Payload: []byte("x"), NoWait: true}, func(pos wal.Position, err error) {
		if err != nil {
			t.Error(err)
		}
		written <- pos
	})
	pos := <-written
	want := newDemand()
	// No member has credit: the wait ends with the context, no round ran.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	b, err := readWhenDurable(short, l, 0, pos.Offset, 10, 1<<20, want)
	cancel()
	if err != nil || len(b.Entries) != 0 {
		t.Fatalf("read without demand: %d entries, %v", len(b.Entries), err)
	}
	if r := l.Stats().Commit.Rounds; r != 0 {
		t.Fatalf("a wait without demand ran %d rounds", r)
	}
	// Credit comes while the fetcher waits: it turns into a reader's wait.
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	got := make(chan wal.Batch, 1)
	go func() {
		b, err := readWhenDurable(ctx, l, 0, pos.Offset, 10, 1<<20, want)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	want.set(true)
	if b := <-got; len(b.Entries) != 1 || string(b.Entries[0].Record.Payload) != "x" {
		t.Fatalf("read once credit came: %+v (rounds %d)", b, l.Stats().Commit.Rounds)
	}
	// nil demand (a peer's fetch) always counts.
	l.AppendAsync(&wal.Record{Device: "dev-a", Payload: []byte("y"), NoWait: true}, func(pos wal.Position, err error) { written <- pos })
	next := <-written
	if b, err := readWhenDurable(ctx, l, 0, next.Offset, 10, 1<<20, nil); err != nil || len(b.Entries) != 1 {
		t.Fatalf("a peer's read: %+v, %v", b, err)
	}
}
