package queue

import (
	"fmt"
	"time"
)

// inFlightEntry finds the delivery an acknowledgement refers to. It must be
// in flight, held by member, at attempt deliveries; anything else is stale.
func (g *Group) inFlightEntry(op string, member MemberID, ref Ref, deliveries int) (int32, error) {
	if g.drained {
		return noEntry, fmt.Errorf("queue: %s %s: %w", op, ref, ErrDrained)
	}
	ei := g.lookupInFlight(member, ref, deliveries)
	if ei == noEntry {
		g.counters.staleAcks++
		return noEntry, fmt.Errorf("queue: %s %s by %q, delivery %d: %w", op, ref, member, deliveries, ErrStale)
	}
	return ei, nil
}

func (g *Group) lookupInFlight(member MemberID, ref Ref, deliveries int) int32 {
	slot, ok := g.members.byID[member]
	if !ok {
		return noEntry
	}
	pi, ok := g.partIdx[ref.Partition]
	if !ok {
		return noEntry
	}
	ei := g.parts[pi].lookup(ref.Offset)
	if ei == noEntry {
		return noEntry
	}
	e := &g.entries[ei]
	if e.state != stInFlight || e.member != slot || int(e.deliveries) != deliveries {
		return noEntry
	}
	return ei
}

// endDelivery takes entry ei out of flight and returns its member's credit.
func (g *Group) endDelivery(ei int32) {
	g.heapRemove(ei)
	g.releaseCredit(g.entries[ei].member)
	g.entries[ei].member = noEntry
}

// Ack finishes a delivery: the message is done.
func (g *Group) Ack(member MemberID, ref Ref, deliveries int, now time.Time) error {
	ei, err := g.inFlightEntry("ack", member, ref, deliveries)
	if err != nil {
		return err
	}
	g.setNow(now)
	g.counters.acked++
	g.endDelivery(ei)
	g.finish(ei)
	g.afterInput()
	return nil
}

// Nak returns a delivery for redelivery, after delay if it is positive
// (capped at Config.MaxNakDelay). The message keeps its place at the head
// of its device queue, so the device waits for it. A message that has
// already been delivered Config.MaxDeliver times is dead-lettered instead.
func (g *Group) Nak(member MemberID, ref Ref, deliveries int, delay time.Duration, now time.Time) error {
	ei, err := g.inFlightEntry("nak", member, ref, deliveries)
	if err != nil {
		return err
	}
	g.setNow(now)
	g.counters.naks++
	g.endDelivery(ei)
	delay = min(delay, g.cfg.MaxNakDelay)
	if g.window > 1 {
		g.failInRun(ei, delay, noMember)
	} else if delay > 0 && int(g.entries[ei].deliveries) < g.cfg.MaxDeliver {
		e := &g.entries[ei]
		e.state = stDelayed
		e.deadline = g.now + int64(delay)
		g.heapPush(ei)
	} else {
		g.failDelivery(ei, false)
	}
	g.afterInput()
	return nil
}

// InProgress restarts the ack_wait of a delivery.
func (g *Group) InProgress(member MemberID, ref Ref, deliveries int, now time.Time) error {
	ei, err := g.inFlightEntry("in_progress", member, ref, deliveries)
	if err != nil {
		return err
	}
	g.setNow(now)
	g.counters.inProgress++
	g.entries[ei].deadline = g.now + int64(g.cfg.AckWait)
	g.heapFix(ei)
	return nil
}

// Term stops delivering a message: it is dead-lettered with ReasonTerm.
func (g *Group) Term(member MemberID, ref Ref, deliveries int, now time.Time) error {
	ei, err := g.inFlightEntry("term", member, ref, deliveries)
	if err != nil {
		return err
	}
	g.setNow(now)
	g.counters.terms++
	g.endDelivery(ei)
	g.deadLetter(ei, ReasonTerm)
	g.afterInput()
	return nil
}

// failDelivery handles a delivery that ended without an ack (its credit is
// already returned): dead-letter after MaxDeliver deliveries, else make it
// dispatchable again.
func (g *Group) failDelivery(ei int32, front bool) {
	g.entries[ei].member = noEntry
	if g.window > 1 {
		g.failInRun(ei, 0, noMember)
		return
	}
	if int(g.entries[ei].deliveries) >= g.cfg.MaxDeliver {
		g.deadLetter(ei, ReasonMaxDeliver)
		return
	}
	g.pushReady(ei, front)
}

func (g *Group) deadLetter(ei int32, reason DeadReason) {
	e := &g.entries[ei]
	g.counters.deadLetters++
	out := &g.out[g.cur]
	out.DeadLetter = append(out.DeadLetter, DeadLetter{Msg: e.msg, Reason: reason, Deliveries: int(e.deliveries)})
	g.finish(ei)
}

// afterInput runs after every input that can free credit or end a drain.
func (g *Group) afterInput() {
	g.checkDrain()
	g.dispatch()
}
