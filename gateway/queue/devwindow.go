package queue

import "time"

// The device window (Config.DeviceWindow > 1, OrderPerDevice only).
//
// With a window of 1 a device has at most one record out of its lane. With
// a window of W it has a run: up to W consecutive records of one lane,
// the first dispatched as usual (ready queue, sticky queue or redelivery)
// and, once that one is delivered, the next ones queued in order for the
// member that holds it (the run's holder), in that member's queue (the
// queues the sticky strategy uses, served by the same loop). So a run is
// always held by one member and goes out in lane order.
//
// The run is a prefix of the lane: records finish (ack, term) in any
// order and leave the lane, and the run grows at its tail as records
// finish and new ones arrive, up to W, stopping at a move marker or a
// record that waits for one.
//
// Any failure in a run stops it: a nak, an ack_wait expiry, a dead letter
// after MaxDeliver, the holder leaving or pausing (credit 0), the
// partition pausing. The records queued for the holder and not delivered
// go back to waiting in the lane, as does the failed one; nothing more of
// the device goes out while any of it is still out (in flight). Once none
// is, the device starts a new run from its oldest unfinished record (the
// lane head), after the longest nak delay the run asked for, and away from
// a member that let one expire. A member that sends a device's records in
// order on one ordered connection therefore never gets a record behind one
// that failed, and whatever it hands back unsent is sent again in order.

// runState is a device's run.
type runState struct {
	part   int32     // the run's lane (partition index)
	tail   int32     // last record of the run; noEntry when none or stopped
	holder memberRef // member holding the run; noMember until the first is delivered
	pauses uint32    // the holder's pause count when it got the run
	// stopped: a failure ended the run; it restarts from the lane head once out is 0.
	stopped bool
	// restartAt and avoid: the longest nak delay (unix ns) and the member
	// that let a record expire, for the restart.
	restartAt int64
	avoid     memberRef
}

// startRun dispatches head as the first record of a run of device di
// (out is already 1).
func (g *Group) startRun(di, head int32) {
	d := &g.devices[di]
	r := d.run
	d.run = runState{part: g.entries[head].part, tail: head, holder: noMember, avoid: noMember}
	if !r.stopped {
		g.pushReady(head, false)
		return
	}
	e := &g.entries[head]
	switch {
	case r.restartAt > g.now:
		e.state = stDelayed
		e.deadline = r.restartAt
		g.heapPush(head)
	case r.avoid.slot != noEntry:
		e.state = stReady
		e.avoid = r.avoid
		g.qPush(&g.redeliver, head)
	default:
		g.pushReady(head, false)
	}
}

// runDelivered notes the holder of a run at its first delivery and grows the run.
func (g *Group) runDelivered(ei, slot int32) {
	e := &g.entries[ei]
	e.follow = false
	di := e.dev
	if d := &g.devices[di]; d.run.holder.slot == noEntry {
		d.run.holder = g.refOf(slot)
		d.run.pauses = g.members.slots[slot].pauses
	}
	g.extendRun(di)
}

// extendRun queues the device's next records for the run's holder, up to the window.
func (g *Group) extendRun(di int32) {
	d := &g.devices[di]
	r := &d.run
	if r.stopped || d.out >= g.window || r.holder.slot == noEntry || r.tail == noEntry {
		return
	}
	slot, ok := g.resolve(r.holder)
	if ok && g.members.slots[slot].pauses != r.pauses {
		g.stopRun(di) // the holder paused since it got the run
		return
	}
	if !ok || g.parts[r.part].paused {
		return
	}
	added := false
	for d.out < g.window {
		next := g.entries[r.tail].laneNext
		if next == noEntry {
			break
		}
		e := &g.entries[next]
		if e.msg.Kind != KindData || !g.markerPassed(e.msg.MoveRef, e.msg.Partition, di) {
			break
		}
		e.follow = true
		e.state = stReady
		g.qPush(&g.members.slots[slot].queue, next)
		d.out++
		r.tail = next
		added = true
	}
	if added {
		g.addWork(slot)
	}
}

// runFinishing keeps the run's tail in its lane when entry ei, about to
// finish, is the tail while earlier records of the run are still out (an
// out-of-order ack).
func (g *Group) runFinishing(di, ei int32) {
	d := &g.devices[di]
	r := &d.run
	if d.out == 1 {
		r.tail, r.holder = noEntry, noMember
		return
	}
	if r.stopped || r.tail != ei {
		return
	}
	for i := range d.lanes {
		if d.lanes[i].part != r.part {
			continue
		}
		for x := d.lanes[i].head; x != noEntry; x = g.entries[x].laneNext {
			if g.entries[x].laneNext == ei {
				r.tail = x
				return
			}
		}
	}
	r.tail = noEntry // not reached: the tail of a run of several is never its lane head
}

// failInRun handles a delivery of a run that ended without an ack (its
// credit is already returned): it stops the run, and the record goes back
// to its lane (or to the dead letters after MaxDeliver deliveries).
func (g *Group) failInRun(ei int32, delay time.Duration, avoid memberRef) {
	e := &g.entries[ei]
	e.member = noEntry
	di := e.dev
	g.stopRun(di)
	if int(e.deliveries) >= g.cfg.MaxDeliver {
		g.deadLetter(ei, ReasonMaxDeliver)
		return
	}
	d := &g.devices[di]
	if delay > 0 {
		d.run.restartAt = max(d.run.restartAt, g.now+int64(delay))
	}
	if avoid.slot != noEntry {
		d.run.avoid = avoid
	}
	e.state = stWaiting
	e.avoid = noMember
	g.runEntryBack(di)
}

// runEntryBack counts one record of device di's run back in its lane and
// restarts the device when none of it is out any more.
func (g *Group) runEntryBack(di int32) {
	d := &g.devices[di]
	d.out--
	if d.out == 0 {
		g.schedule(di)
	}
}

// stopRun stops device di's run: the records queued for its holder and not
// delivered go back to waiting in the lane. The caller still counts the
// record it handles as out.
func (g *Group) stopRun(di int32) {
	d := &g.devices[di]
	if d.run.stopped {
		return
	}
	d.run.stopped = true
	d.run.tail = noEntry
	slot, ok := g.resolve(d.run.holder)
	if !ok {
		return // the holder left: its queue was emptied then (requeueFollow)
	}
	q := &g.members.slots[slot].queue
	keep := newEntryQueue()
	for q.n > 0 {
		x := g.qPop(q)
		if e := &g.entries[x]; e.follow && e.dev == di {
			e.follow = false
			e.state = stWaiting
			d.out--
			continue
		}
		g.qPush(&keep, x)
	}
	*q = keep
}

// pullBackFollow takes back a queued record of a run whose partition is
// paused (just taken off its holder's queue): the run stops, as on a failure.
func (g *Group) pullBackFollow(ei int32) {
	e := &g.entries[ei]
	di := e.dev
	g.stopRun(di)
	e.follow = false
	e.state = stWaiting
	g.runEntryBack(di)
}

// requeueFollow puts a queued record of a run, taken off its member queue
// while the queues are rebuilt, back in its holder's queue, or, when the
// holder left or paused, back in its lane, stopping the run. It reports
// the device when its run ended, to be restarted once the queues are rebuilt.
func (g *Group) requeueFollow(ei int32) (int32, bool) {
	e := &g.entries[ei]
	di := e.dev
	d := &g.devices[di]
	if slot, ok := g.resolve(d.run.holder); ok && !d.run.stopped && g.members.slots[slot].credit > 0 {
		g.qPush(&g.members.slots[slot].queue, ei)
		g.addWork(slot)
		return di, false
	}
	d.run.stopped = true
	d.run.tail = noEntry
	e.follow = false
	e.state = stWaiting
	d.out--
	return di, d.out == 0
}
