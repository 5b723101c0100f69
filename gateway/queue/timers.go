package queue

import (
	"fmt"
	"time"
)

// Tick fires the timers due at now: deliveries past their ack_wait are
// redelivered (to another member where one exists) or dead-lettered after
// Config.MaxDeliver deliveries; nak delays that ended release their
// message; an expired Drain deadline completes the drain. Timers fire only
// here, so an ack that arrives after the deadline but before Tick counts.
func (g *Group) Tick(now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: tick: %w", ErrDrained)
	}
	g.setNow(now)
	for len(g.timers) > 0 {
		ei := g.timers[0]
		e := &g.entries[ei]
		if e.deadline > g.now {
			break
		}
		g.heapRemove(ei)
		if e.state == stDelayed {
			g.pushReady(ei, false)
			continue
		}
		g.counters.timeouts++
		holder := e.member
		g.releaseCredit(holder)
		if g.window > 1 {
			e.member = noEntry
			g.failInRun(ei, 0, g.refOf(holder))
			continue
		}
		if int(e.deliveries) >= g.cfg.MaxDeliver {
			e.member = noEntry
			g.deadLetter(ei, ReasonMaxDeliver)
			continue
		}
		e.member = noEntry
		e.avoid = g.refOf(holder)
		e.state = stReady
		g.qPush(&g.redeliver, ei)
	}
	g.afterInput()
	return nil
}

// NextDeadline returns when Tick next has work: the earliest ack deadline,
// nak release or drain deadline. The runner sleeps until then (or until
// another input) instead of ticking blindly. false: no timer is pending.
func (g *Group) NextDeadline() (time.Time, bool) {
	if g.drained {
		return time.Time{}, false
	}
	var next int64
	ok := false
	if len(g.timers) > 0 {
		next, ok = g.entries[g.timers[0]].deadline, true
	}
	if g.draining && (!ok || g.drainDeadline < next) {
		next, ok = g.drainDeadline, true
	}
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, next), true
}

// The timer heap is a binary min-heap of entry indices ordered by deadline
// (ties by index, so the order never depends on anything but the inputs).
// Each entry knows its heap position, so removal and fix are O(log n).

func (g *Group) heapLess(i, j int) bool {
	a, b := &g.entries[g.timers[i]], &g.entries[g.timers[j]]
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return g.timers[i] < g.timers[j]
}

func (g *Group) heapSwap(i, j int) {
	h := g.timers
	h[i], h[j] = h[j], h[i]
	g.entries[h[i]].heapIdx = int32(i)
	g.entries[h[j]].heapIdx = int32(j)
}

func (g *Group) heapUp(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !g.heapLess(i, parent) {
			return
		}
		g.heapSwap(i, parent)
		i = parent
	}
}

func (g *Group) heapDown(i int) bool {
	start := i
	n := len(g.timers)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		small := l
		if r := l + 1; r < n && g.heapLess(r, l) {
			small = r
		}
		if !g.heapLess(small, i) {
			break
		}
		g.heapSwap(i, small)
		i = small
	}
	return i > start
}

func (g *Group) heapPush(ei int32) {
	g.entries[ei].heapIdx = int32(len(g.timers))
	g.timers = append(g.timers, ei)
	g.heapUp(len(g.timers) - 1)
}

func (g *Group) heapRemove(ei int32) {
	i := int(g.entries[ei].heapIdx)
	if i < 0 {
		return
	}
	last := len(g.timers) - 1
	if i != last {
		g.heapSwap(i, last)
	}
	g.timers = g.timers[:last]
	g.entries[ei].heapIdx = -1
	if i != last {
		if !g.heapDown(i) {
			g.heapUp(i)
		}
	}
}

func (g *Group) heapFix(ei int32) {
	i := int(g.entries[ei].heapIdx)
	if i < 0 {
		return
	}
	if !g.heapDown(i) {
		g.heapUp(i)
	}
}
