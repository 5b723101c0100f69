package serial

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"edgeq/wal"
)

// heldAppender stores in a real log but holds the completions until
// released, like a log whose fsync stalls.
type heldAppender struct {
	log  *wal.Log
	mu   sync.Mutex
	held []func()
	hold bool
}

func (h *heldAppender) AppendAsync(rec *wal.Record, done func(wal.Position, error)) {
	h.log.AppendAsync(rec, func(pos wal.Position, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.hold {
			h.held = append(h.held, func() { done(pos, err) })
			return
		}
		done(pos, err)
	})
}

func (h *heldAppender) release() {
	h.mu.Lock()
	held := h.held
	h.held, h.hold = nil, false
	h.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// TestPendingAppendsBounded: with the log stalled, at most max_pending
// appends are outstanding; the reader waits (nothing is dropped) and
// catches up when the log does.
func TestPendingAppendsBounded(t *testing.T) {
	s := newSensor(t)
	link := filepath.Join(t.TempDir(), "by-id")
	pointLink(t, link, s.path)
	app := &heldAppender{log: openLog(t), hold: true}
	cfg := portConfig("bounded", link)
	cfg.MaxPending = 4
	p, err := New(cfg, app, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(10 * time.Second)
	waitOpen(t, p, s.path)
	for i := range 10 {
		s.write(t, meterFrame("m", i))
	}
	waitFor(t, "the reader waiting for a free slot", func() bool {
		st := p.Status()
		return st.Pending == 4 && st.StorageWaits >= 1
	})
	if st := p.Status(); st.Stored != 0 || st.FramesIn != 5 {
		t.Fatalf("with 4 appends held: %+v; want 4 pending and the 5th frame waiting", st)
	}
	app.release() // and stop holding
	waitStored(t, p, 10)
	st := p.Status()
	if st.Stored != 10 || st.Pending != 0 || st.Dropped["shutdown"] != 0 {
		t.Fatalf("after release: %+v", st)
	}
	checkAccounting(t, st)

	// Stop waits for outstanding appends, and says so when they do not end.
	app.mu.Lock()
	app.hold = true
	app.mu.Unlock()
	s.write(t, meterFrame("m", 10))
	waitFor(t, "one append held", func() bool { return p.Status().Pending == 1 })
	if err := p.Stop(50 * time.Millisecond); !errors.Is(err, ErrStopTimeout) {
		t.Fatalf("Stop with an append held = %v, want ErrStopTimeout", err)
	}
	app.release()
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop after release = %v", err)
	}
	if st := p.Status(); st.Stored != 11 || st.Open {
		t.Fatalf("after stop: %+v", st)
	}
}

// TestStorageErrorsCounted: frames the log refuses are lost, counted as
// storage errors, and the port keeps reading.
func TestStorageErrorsCounted(t *testing.T) {
	s := newSensor(t)
	link := filepath.Join(t.TempDir(), "by-id")
	pointLink(t, link, s.path)
	log, err := wal.Open(filepath.Join(t.TempDir(), "wal"), wal.DefaultOptions(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startPort(t, portConfig("errs", link), log)
	waitOpen(t, p, s.path)
	s.write(t, meterFrame("m", 0))
	waitStored(t, p, 1)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		s.write(t, meterFrame("m", i))
	}
	waitFor(t, "5 storage errors", func() bool { return p.Status().StorageErrors == 5 })
	st := p.Status()
	if !st.Open || st.Stored != 1 {
		t.Fatalf("after storage errors: %+v", st)
	}
	checkAccounting(t, st)
}

func TestStartStopLifecycle(t *testing.T) {
	p, err := New(portConfig("life", filepath.Join(t.TempDir(), "none")), openLog(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatalf("Stop before Start = %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The path is free again for another port.
	q, err := New(portConfig("life2", p.cfg.Path), openLog(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatalf("Start after the first port stopped = %v", err)
	}
	if err := q.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestStopByContext: cancelling Start's context ends the port too.
func TestStopByContext(t *testing.T) {
	s := newSensor(t)
	link := filepath.Join(t.TempDir(), "by-id")
	pointLink(t, link, s.path)
	p, err := New(portConfig("ctx", link), openLog(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, p, s.path)
	cancel()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the port kept running after its context ended")
	}
	if st := p.Status(); st.Open {
		t.Fatalf("still open: %+v", st)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
}
