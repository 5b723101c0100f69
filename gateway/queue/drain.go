package queue

import (
	"fmt"
	"time"
)

// Drain starts the hand-over of a leader that stops in good order (a clean
// shutdown, or a higher-ranked node taking the group over): the group stops
// reading and delivers nothing above the highest offset it has delivered
// in each partition (its mark), but it goes on delivering what is
// unfinished below the mark: records it skipped while their device was
// busy, messages that return (naks, expiries, members leaving), and those
// waiting for a nak delay, released at once. A partition's commit is the
// end of its finished prefix, so without this the gaps the leader leaves
// would hold the final commit below records already delivered and acked,
// and the next leader would deliver those again.
//
// Records set aside below a mark (aside.go) are read again (Refetch) and
// delivered the same way; nothing else is read.
//
// The drain completes when nothing is in flight, nothing below a mark waits
// for a timer (a nak delay of a nak made while draining) and no re-read
// below a mark is due or outstanding, or at deadline (observed by Tick or
// any later input). Unfinished records below a mark that no member can
// take (no member with credit) do not hold it up. The next Ready then
// carries the final Commit actions and Drained; the group takes no more
// input. Calling Drain again moves the deadline.
func (g *Group) Drain(deadline, now time.Time) error { return g.startDrain(deadline, now, false) }

// Withdraw is the hand-over of a leader that has been deposed: a newer one
// exists and delivers from the commits, so this one delivers nothing more
// (messages that return stay for the next owner) and only waits for the
// acknowledgements of what is in flight until deadline, then emits the
// final commits and Drained as Drain does. Called after Drain it stops the
// gap filling; Drain after Withdraw only moves the deadline.
func (g *Group) Withdraw(deadline, now time.Time) error { return g.startDrain(deadline, now, true) }

func (g *Group) startDrain(deadline, now time.Time, withdraw bool) error {
	if g.drained {
		return fmt.Errorf("queue: drain: %w", ErrDrained)
	}
	g.setNow(now)
	g.draining = true
	g.withdrawing = g.withdrawing || withdraw
	g.drainDeadline = deadline.UnixNano()
	if !g.withdrawing {
		g.releaseDelayed()
	}
	g.checkDrain()
	return nil
}

// releaseDelayed makes the messages waiting for a nak delay dispatchable now.
func (g *Group) releaseDelayed() {
	g.scratch = g.scratch[:0]
	for _, ei := range g.timers {
		if g.entries[ei].state == stDelayed {
			g.scratch = append(g.scratch, ei)
		}
	}
	for _, ei := range g.scratch {
		g.heapRemove(ei)
		g.pushReady(ei, false)
	}
	g.scratch = g.scratch[:0]
}

// Draining reports whether Drain or Withdraw was called.
func (g *Group) Draining() bool { return g.draining }

// Drained reports whether the hand-over completed.
func (g *Group) Drained() bool { return g.drained }

// checkDrain delivers what a draining group still may, then completes the
// drain when nothing is left to wait for.
func (g *Group) checkDrain() {
	if !g.draining || g.drained {
		return
	}
	g.dispatch()
	// Every timer left is a nak delay while nothing is in flight.
	if g.now >= g.drainDeadline || (g.inFlight == 0 && (g.withdrawing || (len(g.timers) == 0 && !g.rereading()))) {
		g.drained = true
		g.drainedPending = true
	}
}

// rereading reports whether records set aside below a mark are being read
// again, or are due to be.
func (g *Group) rereading() bool {
	for i := range g.parts {
		if g.parts[i].refetching || g.refetchDue(int32(i)) >= 0 {
			return true
		}
	}
	return false
}

// drainDelivers reports whether a draining group may deliver now (before
// its deadline, and not withdrawn).
func (g *Group) drainDelivers() bool {
	return !g.withdrawing && g.now < g.drainDeadline
}

// aboveMark reports whether entry ei is a first delivery above its
// partition's mark while draining: it is not delivered.
func (g *Group) aboveMark(ei int32) bool {
	e := &g.entries[ei]
	return g.draining && e.deliveries == 0 && e.msg.Offset > g.parts[e.part].highDelivered
}

// withhold keeps entry ei, just taken off its ready queue, from a draining
// group's delivery when it is above its partition's mark, and reports
// whether it did. The entry stays its device's lane head, waiting, so the
// device's lanes in other partitions may go on below their marks.
func (g *Group) withhold(ei int32) bool {
	if !g.aboveMark(ei) {
		return false
	}
	e := &g.entries[ei]
	e.state = stWaiting
	if g.cfg.Ordering == OrderPerDevice {
		di := e.dev
		if g.window > 1 { // a run's record: the run stops here, as on a failure
			g.stopRun(di)
			e.follow = false
			g.runEntryBack(di)
		} else {
			g.devices[di].out--
			g.schedule(di)
		}
	}
	return true
}
