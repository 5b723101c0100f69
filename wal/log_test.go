package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

func TestAppendReadRoundTrip(t *testing.T) {
	for _, mode := range []Durability{DurabilityAlways, DurabilityInterval, DurabilityNone} {
		t.Run(string(mode), func(t *testing.T) {
			o := testOptions()
			o.Durability = mode
			l := openTest(t, t.TempDir(), o)
			defer l.Close()
			const devices, per = 20, 30
			var wg sync.WaitGroup
			positions := make([][]Position, devices)
			for d := 0; d < devices; d++ {
				wg.Add(1)
				go func(d int) {
					defer wg.Done()
					positions[d] = appendN(t, l, fmt.Sprintf("dev-%d", d), per)
				}(d)
			}
			wg.Wait()
			for d, ps := range positions {
				for i, p := range ps {
					if p.Seq != uint64(i+1) {
						t.Fatalf("dev-%d #%d: seq %d", d, i, p.Seq)
					}
					if p.Partition != l.HomePartition(fmt.Sprintf("dev-%d", d)) {
						t.Fatalf("dev-%d in partition %d", d, p.Partition)
					}
					if p.Offset > l.Durable(p.Partition) {
						t.Fatalf("acked offset %d beyond durable %d", p.Offset, l.Durable(p.Partition))
					}
				}
			}
			total := 0
			for p := 0; p < l.NumPartitions(); p++ {
				lastSeq := map[string]uint64{}
				for _, e := range readAll(t, l, p) {
					total++
					if e.Record.Seq != lastSeq[e.Record.Device]+1 {
						t.Fatalf("partition %d offset %d: %s seq %d after %d", p, e.Offset, e.Record.Device, e.Record.Seq, lastSeq[e.Record.Device])
					}
					lastSeq[e.Record.Device] = e.Record.Seq
					want := string(payloadFor(e.Record.Device, int(e.Record.Seq-1)))
					if string(e.Record.Payload) != want || e.Record.Source != "test" || e.Record.Time == 0 {
						t.Fatalf("record %+v, want payload %q", e.Record, want)
					}
				}
			}
			if total != devices*per {
				t.Fatalf("read %d records, want %d", total, devices*per)
			}
		})
	}
}

func TestSequencesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	l := openTest(t, dir, o)
	appendN(t, l, "a", 5)
	appendN(t, l, "b", 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		l = openTest(t, dir, o)
		ps := appendN(t, l, "a", 2)
		if want := uint64(5 + 2*round + 1); ps[0].Seq != want {
			t.Fatalf("round %d: seq after reopen %d, want %d", round, ps[0].Seq, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Without a checkpoint the log itself is scanned.
		if round == 0 {
			if err := removeFile(dir, checkpointFile); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, testOptions())
	defer l.Close()
	if _, err := Open(dir, testOptions(), quietLogger()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestMetaMismatch(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, testOptions())
	l.Close()
	o := testOptions()
	o.Partitions = 5
	if _, err := Open(dir, o, quietLogger()); err == nil {
		t.Fatal("open with other partition count succeeded")
	}
}

func TestRejectsBadInput(t *testing.T) {
	l := openTest(t, t.TempDir(), testOptions())
	defer l.Close()
	ctx := context.Background()
	cases := []struct {
		rec  Record
		want error
	}{
		{Record{Device: ""}, ErrBadDeviceID},
		{Record{Device: "bad device"}, ErrBadDeviceID},
		{Record{Device: "x/y"}, ErrBadDeviceID},
		{Record{Device: string(make([]byte, 129))}, ErrBadDeviceID},
		{Record{Device: "ok", Payload: make([]byte, 2<<20)}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := l.Append(ctx, &c.rec); !errors.Is(err, c.want) {
			t.Errorf("append %q: %v, want %v", c.rec.Device, err, c.want)
		}
	}
	if s := l.Stats(); s.Rejected["bad_device_id"] != 4 || s.Rejected["too_large"] != 1 {
		t.Fatalf("rejected counters %v", s.Rejected)
	}
	// Good appends still work and the bad ones consumed no sequence numbers.
	if ps := appendN(t, l, "ok", 1); ps[0].Seq != 1 {
		t.Fatalf("seq %d", ps[0].Seq)
	}
}

func TestTooManyDevices(t *testing.T) {
	o := testOptions()
	o.MaxDevices = 3
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	for i := 0; i < 3; i++ {
		appendN(t, l, fmt.Sprintf("d%d", i), 1)
	}
	if _, err := l.Append(context.Background(), &Record{Device: "d4"}); !errors.Is(err, ErrTooManyDevices) {
		t.Fatalf("fourth device: %v", err)
	}
	appendN(t, l, "d1", 1) // known devices go on
}

func TestNotifyWakesReader(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 5 * time.Millisecond
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	p := l.HomePartition("w")
	ch := l.Notify(p)
	if l.Durable(p) != 0 {
		t.Fatal("durable before any append")
	}
	done := make(chan Position)
	go func() { done <- appendN(t, l, "w", 1)[0] }()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("reader not woken")
	}
	pos := <-done
	if l.Durable(p) < pos.Offset {
		t.Fatalf("durable %d < acked %d", l.Durable(p), pos.Offset)
	}
}

func TestAppendAsync(t *testing.T) {
	l := openTest(t, t.TempDir(), testOptions())
	defer l.Close()
	const n = 500
	var wg sync.WaitGroup
	wg.Add(n)
	recs := make([]Record, n)
	var mu sync.Mutex
	seqs := map[uint64]bool{}
	for i := range recs {
		recs[i] = Record{Device: "async", Payload: []byte{byte(i)}}
		l.AppendAsync(&recs[i], func(p Position, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("async append: %v", err)
				return
			}
			mu.Lock()
			seqs[p.Seq] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seqs) != n {
		t.Fatalf("%d distinct seqs, want %d", len(seqs), n)
	}
	l.Close()
	var called bool
	l.AppendAsync(&Record{Device: "x"}, func(_ Position, err error) { called = errors.Is(err, ErrClosed) })
	if !called {
		t.Fatal("append after close did not fail with ErrClosed")
	}
}

func TestDamagedCheckpointFallsBackToScan(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	l := openTest(t, dir, o)
	appendN(t, l, "a", 7)
	l.Close()
	path := dir + "/" + checkpointFile
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	os.WriteFile(path, data, 0o640)
	l = openTest(t, dir, o)
	defer l.Close()
	if l.Report().CheckpointFound {
		t.Fatal("a damaged checkpoint was used")
	}
	if ps := appendN(t, l, "a", 1); ps[0].Seq != 8 {
		t.Fatalf("seq after a damaged checkpoint: %d, want 8", ps[0].Seq)
	}
}
