package uplink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// fakeTransport answers from a script; it records what it was sent.
type fakeTransport struct {
	mu      sync.Mutex
	batches [][]string // msg IDs per Send
	answer  func(call int, batch []*Item, i int) Result
	block   chan struct{} // when set, Send waits on it
	atomic  bool
}

func (f *fakeTransport) Send(ctx context.Context, batch []*Item, res []Result) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	call := len(f.batches)
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.MsgID()
	}
	f.batches = append(f.batches, ids)
	f.mu.Unlock()
	for i := range batch {
		res[i] = f.answer(call, batch, i)
	}
}
func (f *fakeTransport) Connected() bool { return true }
func (f *fakeTransport) Close()          {}

type atomicFake struct{ *fakeTransport }

func (atomicFake) atomicBatches() bool { return true }

type fakeAcker struct {
	mu   sync.Mutex
	acks []groups.Ack
}

func (a *fakeAcker) Ack(x groups.Ack) error {
	a.mu.Lock()
	a.acks = append(a.acks, x)
	a.mu.Unlock()
	return nil
}

func (a *fakeAcker) kinds() map[uint64][]groups.AckKind {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[uint64][]groups.AckKind{}
	for _, x := range a.acks {
		out[x.Handle.Offset] = append(out[x.Handle.Offset], x.Kind)
	}
	return out
}

func (a *fakeAcker) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acks)
}

func delivery(off uint64, dev string, deliveries int) *groups.Delivery {
	return &groups.Delivery{Record: &wal.Record{Device: dev, Seq: off, Time: 1, Payload: []byte(`{"v":1}`)}, Node: "gw",
		Partition: 0, Offset: off, Deliveries: deliveries,
		Ack: groups.AckHandle{Group: 1, Member: "uplink:t", Offset: off, Deliveries: deliveries}}
}

func testConfig() Config {
	c := DefaultConfig()
	c.Name, c.Type, c.Window, c.RetryMin, c.RetryMax, c.Timeout = "t", TypeNATS, 4, 100*time.Millisecond, time.Second, time.Second
	return c
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // generous: only a failing test waits it out
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// runUplink opens the uplink of cfg (its real transport) answering a fake
// acker, runs it, and closes it when the test ends.
func runUplink(t *testing.T, cfg Config) (*Uplink, *fakeAcker) {
	t.Helper()
	ack := &fakeAcker{}
	u, err := Open(cfg, "gw", ack, quiet)
	if err != nil {
		t.Fatal(err)
	}
	go u.Run(context.Background())
	t.Cleanup(u.Close)
	return u, ack
}

func TestOutcomesToAcks(t *testing.T) {
	tr := &fakeTransport{answer: func(_ int, b []*Item, i int) Result {
		switch b[i].Offset {
		case 2:
			return Result{Outcome: Retry, Err: errors.New("down")}
		case 3:
			return Result{Outcome: Permanent, Err: errors.New("too large")}
		}
		return Result{Outcome: OK}
	}}
	ack := &fakeAcker{}
	u := New(testConfig(), tr, ack, quiet, nil)
	u.rnd = func() float64 { return 0.5 }
	go u.Run(context.Background())
	defer u.Close()
	for off := uint64(1); off <= 3; off++ {
		if !u.Deliver(delivery(off, "d"+string(rune('0'+off)), 1)) {
			t.Fatal("delivery refused")
		}
	}
	waitUntil(t, "3 answers", func() bool { return ack.count() == 3 })
	k := ack.kinds()
	if k[1][0] != groups.AckDone || k[2][0] != groups.AckNak || k[3][0] != groups.AckTerm {
		t.Fatalf("acks %v", k)
	}
	for _, a := range ack.acks {
		// deliveries 1: between half and all of retry_min (rnd 0.5: 75ms).
		if a.Kind == groups.AckNak && a.Delay != 75*time.Millisecond {
			t.Errorf("nak delay %v, want 75ms", a.Delay)
		}
	}
	s := u.Stats()
	if s.Acked != 1 || s.Retried != 1 || s.DeadLetters != 1 || s.Failed != 2 || s.Held != 0 || s.State == "" {
		t.Errorf("stats %+v", s)
	}
	if s.OldestUnsentSeconds <= 0 {
		t.Errorf("oldest unsent %v, want the failed record's age", s.OldestUnsentSeconds)
	}
}

func TestRetryDelayGrowsAndCaps(t *testing.T) {
	u := New(testConfig(), &fakeTransport{}, &fakeAcker{}, quiet, nil)
	u.rnd = func() float64 { return 0.999999 }
	prev := time.Duration(0)
	for d := 1; d <= 10; d++ {
		got := u.RetryDelay(d)
		if got < prev || got > time.Second {
			t.Fatalf("delivery %d: delay %v after %v (cap 1s)", d, got, prev)
		}
		prev = got
	}
	if prev < 900*time.Millisecond {
		t.Errorf("delay did not reach the cap: %v", prev)
	}
}

// TestWindowBound: with the upstream stuck, the uplink takes Window records
// and refuses more (the group never offers more: credit = window).
func TestWindowBound(t *testing.T) {
	tr := &fakeTransport{block: make(chan struct{}), answer: func(int, []*Item, int) Result { return Result{Outcome: OK} }}
	u := New(testConfig(), tr, &fakeAcker{}, quiet, nil)
	go u.Run(context.Background())
	defer u.Close()
	taken := 0
	for off := uint64(1); off <= 20; off++ {
		if u.Deliver(delivery(off, "d", 1)) {
			taken++
		}
		time.Sleep(time.Millisecond)
	}
	// One batch (at most Window) is in Send, twice Window more fit in the queue.
	if taken > 3*u.Window() || u.Stats().Refused == 0 {
		t.Fatalf("took %d with window %d, refused %d", taken, u.Window(), u.Stats().Refused)
	}
	close(tr.block)
}

// TestAtomicBatchRetriedInPlace: an atomic (HTTP) batch that fails is sent
// again as the same batch (same idempotency key), with in-progress acks;
// a refused batch is split so only the bad record is dead-lettered.
func TestAtomicBatchRetriedInPlace(t *testing.T) {
	f := &fakeTransport{answer: func(call int, b []*Item, i int) Result {
		for _, it := range b {
			if it.Offset == 3 {
				return Result{Outcome: Permanent, Err: errors.New("400")}
			}
		}
		if call < 2 {
			return Result{Outcome: Retry, Err: errors.New("500")}
		}
		return Result{Outcome: OK}
	}}
	cfg := testConfig()
	cfg.RetryMin, cfg.RetryMax = time.Millisecond, 5*time.Millisecond
	ack := &fakeAcker{}
	u := New(cfg, atomicFake{f}, ack, quiet, nil)
	u.Deliver(delivery(1, "a", 1))
	u.Deliver(delivery(2, "b", 1))
	go u.Run(context.Background())
	defer u.Close()
	waitUntil(t, "both acked", func() bool {
		k := ack.kinds()
		return len(k[1]) > 0 && k[1][len(k[1])-1] == groups.AckDone && len(k[2]) > 0 && k[2][len(k[2])-1] == groups.AckDone
	})
	f.mu.Lock()
	if len(f.batches) != 3 || len(f.batches[0]) != 2 || f.batches[0][0] != f.batches[2][0] || f.batches[0][1] != f.batches[2][1] {
		t.Errorf("batches %v, want the same batch three times", f.batches)
	}
	f.mu.Unlock()
	for _, k := range ack.kinds()[1][:2] {
		if k != groups.AckInProgress {
			t.Errorf("acks of a retried record %v, want in_progress before done", ack.kinds()[1])
		}
	}
	// A batch with a refused record: split, only it is termed.
	u.Deliver(delivery(3, "c", 1))
	u.Deliver(delivery(4, "d", 1))
	waitUntil(t, "3 termed, 4 acked", func() bool {
		k := ack.kinds()
		return len(k[3]) == 1 && k[3][0] == groups.AckTerm && len(k[4]) == 1 && k[4][0] == groups.AckDone
	})
}

func TestRateLimit(t *testing.T) {
	tr := &fakeTransport{answer: func(int, []*Item, int) Result { return Result{Outcome: OK} }}
	cfg := testConfig()
	cfg.Window, cfg.RateMsgs = 64, 100 // burst 10
	ack := &fakeAcker{}
	u := New(cfg, tr, ack, quiet, nil)
	for off := uint64(1); off <= 40; off++ {
		u.Deliver(delivery(off, "d", 1))
	}
	start := time.Now()
	go u.Run(context.Background())
	defer u.Close()
	waitUntil(t, "40 acked", func() bool { return ack.count() == 40 })
	// 40 at 100/s with a burst of 10 cannot take less than 300ms.
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("40 records in %v at 100 msgs/s", el)
	}
}

func TestBatchBytesBound(t *testing.T) {
	tr := &fakeTransport{answer: func(int, []*Item, int) Result { return Result{Outcome: OK} }}
	cfg := testConfig()
	cfg.Window, cfg.HTTP.Batch, cfg.HTTP.BatchBytes = 16, 10, 2048
	ack := &fakeAcker{}
	u := New(cfg, tr, ack, quiet, nil)
	for off := uint64(1); off <= 6; off++ {
		d := delivery(off, "d", 1)
		d.Record.Payload = make([]byte, 1000)
		u.Deliver(d)
	}
	go u.Run(context.Background())
	defer u.Close()
	waitUntil(t, "6 acked", func() bool { return ack.count() == 6 })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, b := range tr.batches {
		if len(b) > 2 {
			t.Fatalf("batches %v: more than 2048 payload bytes in one", tr.batches)
		}
	}
	if len(tr.batches) != 3 {
		t.Errorf("%d batches, want 3 of 2", len(tr.batches))
	}
}
