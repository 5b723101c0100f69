package jsapi

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// Dedup remembers Nats-Msg-Id values of recent publishes for a window, as
// JetStream's duplicate window does: a publish whose ID is known answers
// with the first one's position and `duplicate: true` and is not stored
// again. Bounded by entries and by time; the clock is injected.
type Dedup struct {
	window time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	byID  map[string]*list.Element // bound: max
	order list.List                // oldest first

	Duplicates atomic.Uint64
	Evicted    atomic.Uint64 // IDs forgotten before their window ended (over max)
}

type dedupEntry struct {
	id      string
	at      time.Time
	done    bool
	value   any
	waiters []func(any) // publishes of the same ID while the first is in flight
}

// NewDedup returns a window of the given length holding at most max IDs.
func NewDedup(window time.Duration, max int, now func() time.Time) *Dedup {
	if now == nil {
		now = time.Now
	}
	return &Dedup{window: window, max: max, now: now, byID: map[string]*list.Element{}}
}

// Begin registers id. New: true means the caller stores the message and
// calls Done(id, value). Otherwise the message is a duplicate and then runs
// with the first one's value (at once, or when that one is done).
func (d *Dedup) Begin(id string, then func(any)) (isNew bool) {
	now := d.now()
	d.mu.Lock()
	d.expire(now)
	if el, ok := d.byID[id]; ok {
		e := el.Value.(*dedupEntry)
		d.Duplicates.Add(1)
		if e.done {
			v := e.value
			d.mu.Unlock()
			then(v)
			return false
		}
		if len(e.waiters) < 64 {
			e.waiters = append(e.waiters, then)
		}
		d.mu.Unlock()
		return false
	}
	for d.order.Len() >= d.max {
		d.remove(d.order.Front())
		d.Evicted.Add(1)
	}
	d.byID[id] = d.order.PushBack(&dedupEntry{id: id, at: now})
	d.mu.Unlock()
	return true
}

// Done records the stored message's value (nil: it failed, and the ID is
// forgotten so a retry is stored) and answers the duplicates that waited.
func (d *Dedup) Done(id string, value any) {
	d.mu.Lock()
	el, ok := d.byID[id]
	if !ok {
		d.mu.Unlock()
		return
	}
	e := el.Value.(*dedupEntry)
	waiters := e.waiters
	e.waiters = nil
	if value == nil {
		d.remove(el)
	} else {
		e.done, e.value = true, value
	}
	d.mu.Unlock()
	for _, w := range waiters {
		w(value)
	}
}

// Len is the number of IDs held.
func (d *Dedup) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.order.Len()
}

func (d *Dedup) expire(now time.Time) {
	for el := d.order.Front(); el != nil; el = d.order.Front() {
		e := el.Value.(*dedupEntry)
		if now.Sub(e.at) < d.window || !e.done {
			return
		}
		d.remove(el)
	}
}

func (d *Dedup) remove(el *list.Element) {
	delete(d.byID, el.Value.(*dedupEntry).id)
	d.order.Remove(el)
}
