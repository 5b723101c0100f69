package queue

import "strings"

// device is the per-device state, kept only while the device has unfinished
// messages in some window (so the table is bounded by the read-ahead).
type device struct {
	id      string
	hash    uint64
	pending int32 // unfinished entries of this device
	// lanes hold the device's unfinished entries per partition, in offset
	// (= append) order, in the order the lanes were created; at most one
	// lane per partition. Only with OrderPerDevice.
	lanes []lane
	// out counts the device's entries out of waiting in their lane (ready,
	// in flight or nak-delayed): at most one, or Config.DeviceWindow for a
	// run (devwindow.go). While it is above 0 no other lane head may be
	// dispatched. Only with OrderPerDevice.
	out int32
	run runState // Config.DeviceWindow > 1 only
	// gated: a lane head waits for a move marker; the device is listed in
	// Group.gated. Only with OrderPerDevice.
	gated bool
	// asides counts the partitions where the device has an aside entry
	// (records set aside or re-read, aside.go); the device stays tracked
	// while it has one. Only with OrderPerDevice.
	asides      int32
	stickyEpoch uint64 // members.epoch when sticky was computed; 0 = never
	sticky      int32  // sticky member slot, or noEntry when no member has credit
}

type lane struct {
	part       int32
	head, tail int32
	n          int32 // entries in the lane: what the device holds of the partition's window
	bytes      int   // their len(Data)
}

// deviceFor returns the index of the device's state, creating it.
func (g *Group) deviceFor(id string) int32 {
	if di, ok := g.deviceIdx[id]; ok {
		return di
	}
	var di int32
	if n := len(g.freeDevices); n > 0 {
		di = g.freeDevices[n-1]
		g.freeDevices = g.freeDevices[:n-1]
	} else {
		g.devices = append(g.devices, device{})
		di = int32(len(g.devices) - 1)
	}
	// A copy: id may point into the buffer of a whole batch of records
	// the runner read, which the group would otherwise keep alive.
	id = strings.Clone(id)
	d := &g.devices[di]
	d.id, d.hash, d.sticky = id, hashString(id), noEntry
	d.run = runState{tail: noEntry, holder: noMember, avoid: noMember}
	g.deviceIdx[id] = di
	return di
}

func (g *Group) freeDevice(di int32) {
	d := &g.devices[di]
	delete(g.deviceIdx, d.id)
	clear(d.lanes)
	*d = device{lanes: d.lanes[:0]} // keep the lane slice's capacity for reuse
	g.freeDevices = append(g.freeDevices, di)
}

// appendToLane adds entry ei at the tail of the device's lane of its partition.
func (g *Group) appendToLane(di, ei int32) {
	d := &g.devices[di]
	e := &g.entries[ei]
	e.laneNext = noEntry
	e.state = stWaiting
	for i := range d.lanes {
		if ln := &d.lanes[i]; ln.part == e.part {
			g.entries[ln.tail].laneNext = ei
			ln.tail = ei
			ln.n++
			ln.bytes += len(e.msg.Data)
			return
		}
	}
	d.lanes = append(d.lanes, lane{part: e.part, head: ei, tail: ei, n: 1, bytes: len(e.msg.Data)})
}

// unlinkFromLane removes entry ei from its lane (in practice always the
// head: only lane heads are dispatched or passed) and drops an empty lane.
func (g *Group) unlinkFromLane(di, ei int32) {
	d := &g.devices[di]
	part := g.entries[ei].part
	for i := range d.lanes {
		ln := &d.lanes[i]
		if ln.part != part {
			continue
		}
		ln.n--
		ln.bytes -= len(g.entries[ei].msg.Data)
		if ln.head == ei {
			ln.head = g.entries[ei].laneNext
		} else {
			for prev := ln.head; prev != noEntry; prev = g.entries[prev].laneNext {
				if g.entries[prev].laneNext == ei {
					g.entries[prev].laneNext = g.entries[ei].laneNext
					if ln.tail == ei {
						ln.tail = prev
					}
					break
				}
			}
		}
		if ln.head == noEntry {
			d.lanes = append(d.lanes[:i], d.lanes[i+1:]...)
		}
		return
	}
}

// markerPassed reports whether the move marker at ref, named by a message
// of partition own, has been passed: it reached the head of its device's
// lane in its partition, i.e. every earlier message of the device there is
// finished. A marker below the window (e.g. at or below the committed
// offset the group started from) is passed; a marker in a partition this
// group does not read cannot be waited for and counts as passed. So does a
// ref into the message's own partition: markers live in the partition the
// device left, and waiting for a later offset of the same lane would never end.
//
// A ref whose record is in the window but is not a move marker of this
// device is corrupt; it is not waited for either.
func (g *Group) markerPassed(ref Ref, own int, di int32) bool {
	if ref.IsZero() || ref.Partition == own {
		return true
	}
	pi, ok := g.partIdx[ref.Partition]
	if !ok {
		return true
	}
	p := &g.parts[pi]
	switch {
	case p.fromEnd:
		return false // start point unknown yet
	case g.setAsideAt(p, di, ref.Offset):
		return false // set aside: not read again yet
	}
	if ei := p.lookup(ref.Offset); ei != noEntry {
		e := &g.entries[ei]
		return e.msg.Kind != KindMoveMarker || e.dev != di
	}
	return ref.Offset < p.next // finished, or not read yet
}

// schedule makes the device's next message dispatchable if the device has
// nothing out of its lanes: it passes move markers that reached a lane head,
// then releases the first lane head that is not waiting for a marker. A
// device with nothing left is forgotten. OrderPerDevice only.
func (g *Group) schedule(di int32) {
	d := &g.devices[di]
	if d.out > 0 {
		if g.window > 1 {
			g.extendRun(di)
		}
		return
	}
	for i := 0; i < len(d.lanes); {
		head := d.lanes[i].head
		e := &g.entries[head]
		if e.msg.Kind == KindMoveMarker {
			g.retire(head) // passed; this may un-gate another lane, so look again from the start
			d = &g.devices[di]
			i = 0
			continue
		}
		if !g.markerPassed(e.msg.MoveRef, e.msg.Partition, di) || g.aboveMark(head) {
			i++
			continue
		}
		d.out = 1
		if g.window > 1 {
			g.startRun(di, head)
			return
		}
		g.pushReady(head, false)
		return
	}
	if d.pending == 0 {
		if d.asides == 0 {
			g.freeDevice(di)
		}
		return
	}
	if !d.gated { // every lane head waits for a marker
		d.gated = true
		g.gated = append(g.gated, di)
	}
}

// recheckGated schedules the devices waiting for a move marker again. A
// marker usually passes through its device's own lane, which schedules the
// device; this catches the other ways: the marker's offset lost to
// retention, a deliver-new start resolved past it, a corrupt ref.
func (g *Group) recheckGated() {
	if len(g.gated) == 0 {
		return
	}
	list := g.gated
	g.gated = g.gatedSpare[:0]
	for _, di := range list {
		g.devices[di].gated = false
	}
	for _, di := range list {
		// pending == 0: freed since it was listed; gated: listed twice and already rescheduled.
		if d := &g.devices[di]; d.pending > 0 && !d.gated {
			g.schedule(di)
		}
	}
	g.gatedSpare = list[:0]
}

// retire removes a finished entry from its window, lane and device, and
// frees it. It does not schedule the device.
func (g *Group) retire(ei int32) {
	e := &g.entries[ei]
	p := &g.parts[e.part]
	p.bytes -= len(e.msg.Data)
	p.held--
	if e.released {
		p.released--
	}
	if e.side {
		g.retireSide(ei)
	} else {
		p.finish(e.msg.Offset)
	}
	di := e.dev
	if g.cfg.Ordering == OrderPerDevice {
		g.unlinkFromLane(di, ei)
	}
	g.devices[di].pending--
	g.held--
	g.freeEntry(ei)
}

// finish completes a dispatched entry (acked, terminated, dead-lettered) and
// lets its device move on.
func (g *Group) finish(ei int32) {
	di := g.entries[ei].dev
	if g.window > 1 {
		g.runFinishing(di, ei)
	}
	g.retire(ei)
	if g.cfg.Ordering == OrderNone {
		if g.devices[di].pending == 0 {
			g.freeDevice(di)
		}
		return
	}
	g.devices[di].out--
	g.schedule(di)
}
