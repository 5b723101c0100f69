package queue

import (
	"fmt"
	"time"
)

// The per-device share of a partition's window (OrderPerDevice only).
//
// A device's messages go out one at a time, so a device with a backlog (a
// hot device, or one whose messages wait behind a move marker) would fill
// its partition's window and stall every other device there. So one device
// holds at most Config.DeviceShareMsgs / DeviceShareBytes of a partition's
// window. The reader does not stop at a record beyond the share: it sets the
// record aside and reads on. From then on every later record of that device
// in the partition is set aside too (its order), until they have all been
// read again.
//
// A set-aside record is unfinished but takes no slot: the ring counts its
// offset as done, so the window base moves past it. What the group keeps is
// one offset range per device and partition, [lo, hi], with "every record of
// the device in [lo, hi] is set aside": a few words per device whatever the
// backlog, at most Config.MaxAsideDevices per partition (beyond that the
// partition is not read further until one ends). The committed offset stays
// below lo, so a restart reads them again from storage.
//
// When the device's share has room again (half of it free, so re-reads come
// in batches), Ready emits a Fetch with Refetch set: read from lo, at most
// the range, at once (the records are durable). Refetched takes the device's
// records from the answer, up to the share, and moves lo past them; other
// devices' records in the answer are ignored. Re-read records are held in
// the partition's side table, by offset, since the ring has moved on.

// aside is one device's set-aside range and re-read records in a partition.
type aside struct {
	dev    int32
	lo, hi uint64 // set-aside records are in [lo, hi]; none when lo > hi
	n      int    // set-aside records (for stats; retention may have taken some)
	// sides counts the device's re-read records held in the side table;
	// sideLow is the lowest of them (they finish in order: lane order).
	sides   int
	sideLow uint64
	// waitEmpty: the last re-read took nothing (the share was full by
	// bytes); re-read again only once the device holds nothing here.
	waitEmpty bool
}

type asideResult uint8

const (
	asideNo      asideResult = iota // take the record into the window
	asideDone                       // set aside
	asideBlocked                    // should be set aside, but the aside table is full: stop reading
)

func (p *partition) findAside(di int32) int {
	for i := range p.aside {
		if p.aside[i].dev == di {
			return i
		}
	}
	return -1
}

// laneLoad is what device di holds of partition pi's window.
func (g *Group) laneLoad(di, pi int32) (n, bytes int) {
	for _, ln := range g.devices[di].lanes {
		if ln.part == pi {
			return int(ln.n), ln.bytes
		}
	}
	return 0, 0
}

// setAside decides whether record m (next in partition pi) is set aside
// because its device is at its share or already has records set aside.
func (g *Group) setAside(pi int32, m *Msg) asideResult {
	if g.cfg.Ordering != OrderPerDevice {
		return asideNo
	}
	di, ok := g.deviceIdx[m.Device]
	if !ok {
		return asideNo
	}
	p := &g.parts[pi]
	ai := -1
	if g.devices[di].asides > 0 {
		ai = p.findAside(di)
	}
	if ai < 0 || p.aside[ai].lo > p.aside[ai].hi {
		n, b := g.laneLoad(di, pi)
		if n == 0 || (n < g.shareMsgs && b+len(m.Data) <= g.shareBytes) {
			return asideNo
		}
		if g.filteredOut(m) {
			return asideNo // finished at once in accept
		}
		if ai < 0 {
			if len(p.aside) >= g.cfg.MaxAsideDevices {
				if !p.blocked {
					p.blocked = true
					g.counters.asideBlocked++
				}
				return asideBlocked
			}
			p.aside = append(p.aside, aside{dev: di})
			ai = len(p.aside) - 1
			g.devices[di].asides++
		}
		p.aside[ai].lo = m.Offset
		g.counters.stallsAvoided++
	} else if g.filteredOut(m) {
		return asideNo
	}
	a := &p.aside[ai]
	a.hi = m.Offset
	a.n++
	g.counters.setAside++
	p.next = m.Offset + 1
	p.finish(m.Offset)
	return asideDone
}

func (g *Group) filteredOut(m *Msg) bool {
	return m.Kind == KindData && g.cfg.Filter != nil && !g.cfg.Filter(m)
}

// refetchDue returns the aside entry of partition pi to read again now, or -1.
func (g *Group) refetchDue(pi int32) int {
	p := &g.parts[pi]
	if len(p.aside) == 0 || p.refetching || g.drained || (g.draining && !g.drainDelivers()) || g.full(p) {
		return -1
	}
	for i := range p.aside {
		a := &p.aside[i]
		if a.lo > a.hi || (g.draining && a.lo > p.highDelivered) {
			continue // none, or above a draining group's mark
		}
		n, b := g.laneLoad(a.dev, pi)
		if n == 0 || (!a.waitEmpty && n <= g.shareMsgs/2 && b <= g.shareBytes/2) {
			return i
		}
	}
	return -1
}

func (g *Group) collectRefetches(out *Ready) {
	for i := range g.parts {
		ai := g.refetchDue(int32(i))
		if ai < 0 {
			continue
		}
		p := &g.parts[i]
		a := &p.aside[ai]
		p.refetching, p.refetchDev = true, a.dev
		// Ask for about as many offsets as hold the records the share has
		// room for, at the density the range was set aside with (other
		// devices' records between them are read and ignored).
		n, _ := g.laneLoad(a.dev, int32(i))
		room := uint64(max(g.shareMsgs-n, 1))
		span := a.hi - a.lo + 1
		want := room*span/uint64(max(a.n, 1)) + room
		out.Fetch = append(out.Fetch, Fetch{
			Partition: p.id,
			From:      a.lo,
			MaxMsgs:   int(min(want, span, uint64(g.cfg.ReadAheadMsgs))),
			MaxBytes:  g.cfg.ReadAheadBytes,
			Refetch:   true,
		})
	}
}

// Refetched answers the outstanding Fetch with Refetch set of partition:
// msgs are the records from the requested offset on, in ascending order, and
// next is the offset after the last one the runner looked at, as for
// Fetched. Records of other devices in msgs are ignored. A malformed answer
// returns ErrBadBatch and is ignored; the records are asked for again.
func (g *Group) Refetched(partition int, msgs []Msg, next uint64, now time.Time) error {
	pi, err := g.takeAnswer("refetched", partition, true)
	if err != nil || (g.draining && !g.drainDelivers()) {
		return err
	}
	p := &g.parts[pi]
	g.setNow(now)
	ai := p.findAside(p.refetchDev)
	if ai < 0 || p.aside[ai].lo > p.aside[ai].hi {
		return nil
	}
	a := &p.aside[ai]
	if err := checkBatch(partition, a.lo, msgs, next); err != nil {
		return fmt.Errorf("queue: refetched partition %d: %w", partition, err)
	}
	di := a.dev
	id := g.devices[di].id
	taken, stopped := 0, false
	for i := range msgs {
		m := &msgs[i]
		if m.Offset > a.hi {
			break
		}
		if m.Device != id {
			continue
		}
		// Room in the device's share and the window; a device holding
		// nothing here takes one record whatever its size.
		n, b := g.laneLoad(di, pi)
		if p.held >= g.cfg.ReadAheadMsgs || p.bytes >= g.cfg.ReadAheadBytes || g.overBudget(p) || (n > 0 && (n >= g.shareMsgs || b+len(m.Data) > g.shareBytes ||
			p.bytes+len(m.Data) > g.cfg.ReadAheadBytes || !g.budgetFits(p, len(m.Data)))) {
			a.lo, stopped = m.Offset, true
			break
		}
		g.acceptSide(pi, ai, m)
		p = &g.parts[pi]
		a = &p.aside[ai]
		a.lo = m.Offset + 1
		a.n--
		taken++
	}
	if !stopped {
		a.lo = max(a.lo, next)
	}
	a.waitEmpty = taken == 0
	if a.lo > a.hi {
		a.n = 0
	}
	g.dropAsideIfDone(pi, ai)
	g.schedule(di)
	g.recheckGated()
	g.dispatch()
	return nil
}

// acceptSide takes a re-read record of aside entry ai into partition pi's side table.
func (g *Group) acceptSide(pi int32, ai int, m *Msg) {
	p := &g.parts[pi]
	a := &p.aside[ai]
	di := a.dev
	g.counters.fetched++
	ei := g.allocEntry()
	g.entries[ei] = entry{msg: *m, part: pi, dev: di, side: true, member: noEntry, avoid: noMember,
		heapIdx: -1, laneNext: noEntry, queueNext: noEntry}
	if p.side == nil {
		p.side = make(map[uint64]int32, g.shareMsgs)
	}
	p.side[m.Offset] = ei
	p.bytes += len(m.Data)
	p.held++
	g.held++
	if a.sides == 0 {
		a.sideLow = m.Offset
	}
	a.sides++
	g.devices[di].pending++
	g.appendToLane(di, ei)
}

// retireSide removes re-read entry ei from its partition's side table.
func (g *Group) retireSide(ei int32) {
	e := &g.entries[ei]
	p := &g.parts[e.part]
	delete(p.side, e.msg.Offset)
	ai := p.findAside(e.dev)
	if ai < 0 {
		return
	}
	a := &p.aside[ai]
	a.sides--
	switch {
	case a.sides == 0:
		a.sideLow = 0
	case a.sideLow == e.msg.Offset:
		// The next re-read record is further down the lane.
		for x := e.laneNext; x != noEntry; x = g.entries[x].laneNext {
			if g.entries[x].side {
				a.sideLow = g.entries[x].msg.Offset
				break
			}
		}
	}
	g.dropAsideIfDone(e.part, ai)
}

// dropAsideIfDone forgets aside entry ai once it has nothing set aside or re-read.
func (g *Group) dropAsideIfDone(pi int32, ai int) {
	p := &g.parts[pi]
	a := p.aside[ai]
	if a.lo <= a.hi || a.sides > 0 {
		return
	}
	last := len(p.aside) - 1
	p.aside[ai] = p.aside[last]
	p.aside = p.aside[:last]
	g.devices[a.dev].asides--
	p.blocked = false
}

// evictBase moves the record at partition pi's window base from the ring to
// the side table when its device has a backlog there (it holds more than
// this one record, or has records set aside): that device's slow progress
// then no longer limits how far the ring reads ahead for the others. The
// record stays held (the commit stays below it). It reports whether it
// moved one.
func (g *Group) evictBase(pi int32) bool {
	ei, ai, ok := g.evictable(pi)
	if !ok {
		return false
	}
	p := &g.parts[pi]
	off := p.base
	di := g.entries[ei].dev
	if ai < 0 {
		p.aside = append(p.aside, aside{dev: di, lo: 1, hi: 0})
		ai = len(p.aside) - 1
		g.devices[di].asides++
	}
	a := &p.aside[ai]
	if a.sides == 0 || off < a.sideLow {
		a.sideLow = off
	}
	a.sides++
	if p.side == nil {
		p.side = make(map[uint64]int32, g.shareMsgs)
	}
	p.side[off] = ei
	g.entries[ei].side = true
	p.finish(off)
	g.counters.evicted++
	g.counters.stallsAvoided++
	return true
}

// evictable reports whether evictBase would move the base record ei of
// partition pi, and its device's aside entry (-1: none yet).
func (g *Group) evictable(pi int32) (ei int32, ai int, ok bool) {
	p := &g.parts[pi]
	if g.cfg.Ordering != OrderPerDevice || p.base == p.next || p.held >= g.cfg.ReadAheadMsgs || g.overBudget(p) {
		return noEntry, -1, false
	}
	ei = p.slots[p.base&p.mask]
	if ei == noEntry {
		return noEntry, -1, false
	}
	di := g.entries[ei].dev
	if g.devices[di].asides > 0 {
		if ai = p.findAside(di); ai >= 0 {
			return ei, ai, true
		}
	}
	if n, _ := g.laneLoad(di, pi); n < 2 || len(p.aside) >= g.cfg.MaxAsideDevices {
		return noEntry, -1, false
	}
	return ei, -1, true
}

// lookup returns the entry of partition p at off, or noEntry.
func (p *partition) lookup(off uint64) int32 {
	if off >= p.base && off < p.next {
		if ei := p.slots[off&p.mask]; ei != noEntry {
			return ei
		}
	}
	if len(p.side) > 0 {
		if ei, ok := p.side[off]; ok {
			return ei
		}
	}
	return noEntry
}

// setAsideAt reports whether device di's record at off in p is set aside (not read yet).
func (g *Group) setAsideAt(p *partition, di int32, off uint64) bool {
	if g.devices[di].asides == 0 {
		return false
	}
	ai := p.findAside(di)
	return ai >= 0 && p.aside[ai].lo <= off && off <= p.aside[ai].hi
}
