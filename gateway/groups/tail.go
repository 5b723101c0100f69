package groups

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"edgeq/wal"
)

// Tail serves plain (non-queue) subscriptions on telemetry subjects: every new
// durable record goes to each matching subscriber, at most once, without acks.
// A subscriber that cannot take a message (slow) misses it; the miss is
// counted. With no subscribers the followers only move their position.
type Tail struct {
	log    *wal.Log
	prefix string
	node   string
	logger *slog.Logger

	start []uint64 // per partition: the first offset followed

	mu     sync.RWMutex
	subs   map[uint64]tailSub // bound: the server's subscription limits
	nextID uint64

	delivered, dropped atomic.Uint64
}

type tailSub struct {
	match deviceMatcher
	m     Member
}

// NewTail returns a live tail over l that follows what becomes durable from
// now on (even before Run's goroutines are scheduled).
func NewTail(l *wal.Log, prefix, node string, logger *slog.Logger) *Tail {
	start := make([]uint64, l.NumPartitions())
	for p := range start {
		start[p] = l.Durable(p) + 1
	}
	return &Tail{log: l, prefix: prefix, node: node, logger: logger, start: start, subs: map[uint64]tailSub{}}
}

// Subscribe adds a subscriber for filter; the returned func removes it.
func (t *Tail) Subscribe(filter string, m Member) (func(), error) {
	match, err := newDeviceMatcher(filter, t.prefix)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.nextID++
	id := t.nextID
	t.subs[id] = tailSub{match: match, m: m}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.subs, id)
		t.mu.Unlock()
	}, nil
}

// Run follows every partition from its current end until ctx ends.
func (t *Tail) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for p := 0; p < t.log.NumPartitions(); p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			t.follow(ctx, p)
		}(p)
	}
	wg.Wait()
}

func (t *Tail) follow(ctx context.Context, p int) {
	next := t.start[p]
	for {
		wake := t.log.Notify(p)
		durable := t.log.Durable(p)
		for next <= durable {
			t.mu.RLock()
			n := len(t.subs)
			t.mu.RUnlock()
			if n == 0 {
				next = durable + 1 // nobody listens: nothing to read
				break
			}
			batch, err := t.log.Read(p, next, 256, 1<<20)
			if err != nil {
				t.logger.Error("live tail read", "partition", p, "err", err)
				next = durable + 1
				break
			}
			next = batch.Next
			for i := range batch.Entries {
				e := &batch.Entries[i]
				if e.Record.Kind == wal.KindData {
					t.fanOut(p, e)
				}
			}
			if len(batch.Entries) == 0 && batch.Next <= next {
				break
			}
		}
		t.mu.RLock()
		n := len(t.subs)
		t.mu.RUnlock()
		if n > 0 && next == durable+1 {
			// Caught up with subscribers: wait as a reader, whose wait
			// makes records nobody waited for durable (and so visible) in
			// the next commit round rather than after lazy_sync.
			if !t.log.WaitReadable(ctx, p, next) {
				return
			}
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

func (t *Tail) fanOut(p int, e *wal.Entry) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := Delivery{Record: &e.Record, Raw: e.Raw, Node: t.node, Partition: p, Offset: e.Offset}
	for _, s := range t.subs {
		if !s.match.match(e.Record.Device) {
			continue
		}
		if s.m.Deliver(&d) {
			t.delivered.Add(1)
		} else {
			t.dropped.Add(1)
		}
	}
}

// TailStats are the live tail's counters.
type TailStats struct {
	Subscribers        int
	Delivered, Dropped uint64
}

// Stats returns the counters.
func (t *Tail) Stats() TailStats {
	t.mu.RLock()
	n := len(t.subs)
	t.mu.RUnlock()
	return TailStats{Subscribers: n, Delivered: t.delivered.Load(), Dropped: t.dropped.Load()}
}
