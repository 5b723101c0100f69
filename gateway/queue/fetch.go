package queue

import (
	"fmt"
	"time"
)

// Fetched answers the outstanding Fetch of partition. msgs are records in
// ascending offset order from the requested offset on; next is the offset
// after the last one the runner looked at (so trailing skipped offsets
// count too). Offsets missing between the requested one and next (dropped by
// retention, skipped as corrupt) are counted as lost and treated as
// finished. The group takes records only while its window has room: at
// most Fetch.MaxMsgs offsets and, after the first record, Fetch.MaxBytes of
// Data; the rest is read again by a later Fetch. Records must be durable
// (see the package comment). A malformed answer returns ErrBadBatch and is
// ignored; the partition is fetched again at the next Ready.
func (g *Group) Fetched(partition int, msgs []Msg, next uint64, now time.Time) error {
	pi, err := g.takeAnswer("fetched", partition, false)
	if err != nil || g.draining {
		return err // draining: reading has stopped; the records stay in storage for the next owner
	}
	p := &g.parts[pi]
	g.setNow(now)
	if p.fromEnd {
		if len(msgs) != 0 || next == 0 {
			return fmt.Errorf("queue: fetched end of partition %d: %w: want no records and next >= 1, got %d records, next %d",
				partition, ErrBadBatch, len(msgs), next)
		}
		p.fromEnd = false
		p.base, p.next = next, next
		p.committed, p.forceCommit = next-1, true
		g.recheckGated() // a marker below the start counts as passed
		g.dispatch()
		return nil
	}
	if err := checkBatch(partition, p.next, msgs, next); err != nil {
		return fmt.Errorf("queue: fetched partition %d: %w", partition, err)
	}
	g.acceptBatch(pi, msgs, next)
	g.recheckGated() // lost offsets or new records may settle what gated devices wait for
	g.dispatch()
	return nil
}

// takeAnswer checks an answer to partition's outstanding Fetch (refetch:
// its Refetch) and marks it answered.
func (g *Group) takeAnswer(op string, partition int, refetch bool) (int32, error) {
	if g.drained {
		return 0, fmt.Errorf("queue: %s partition %d: %w", op, partition, ErrDrained)
	}
	pi, ok := g.partIdx[partition]
	if !ok {
		return 0, fmt.Errorf("queue: %s partition %d: %w", op, partition, ErrUnknownPartition)
	}
	p := &g.parts[pi]
	outstanding := &p.fetching
	if refetch {
		outstanding = &p.refetching
	}
	if !*outstanding {
		return 0, fmt.Errorf("queue: %s partition %d: %w", op, partition, ErrNoFetch)
	}
	*outstanding = false
	return pi, nil
}

func checkBatch(partition int, from uint64, msgs []Msg, next uint64) error {
	if next < from {
		return fmt.Errorf("%w: next %d is before the requested offset %d", ErrBadBatch, next, from)
	}
	prev := from
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Partition != partition:
			return fmt.Errorf("%w: record %d is from partition %d", ErrBadBatch, i, m.Partition)
		case m.Offset < prev || (i > 0 && m.Offset == prev):
			return fmt.Errorf("%w: record %d has offset %d, want > %d", ErrBadBatch, i, m.Offset, prev)
		case m.Offset >= next:
			return fmt.Errorf("%w: record %d has offset %d, not below next %d", ErrBadBatch, i, m.Offset, next)
		case m.Kind > KindMoveMarker:
			return fmt.Errorf("%w: record %d has unknown kind %d", ErrBadBatch, i, m.Kind)
		}
		prev = m.Offset
	}
	return nil
}

// acceptBatch takes the records that fit the window of partition pi.
func (g *Group) acceptBatch(pi int32, msgs []Msg, next uint64) {
	p := &g.parts[pi]
	ra := g.cfg.ReadAheadMsgs
	took := false
	for i := range msgs {
		m := &msgs[i]
		g.skip(p, m.Offset)
		for p.next == m.Offset && p.span() >= ra && g.evictBase(pi) {
		}
		if p.next != m.Offset || p.span() >= ra {
			return // window full
		}
		switch g.setAside(pi, m) {
		case asideDone:
			p.fresh = false
			continue
		case asideBlocked:
			return
		}
		// The first record is taken whatever its size, unless a re-read
		// (aside.go) used the byte budget up meanwhile; likewise under the
		// read-ahead budget (budget.go).
		if p.held >= ra || p.bytes >= g.cfg.ReadAheadBytes || (took && p.bytes+len(m.Data) > g.cfg.ReadAheadBytes) ||
			g.overBudget(p) || (took && !g.budgetFits(p, len(m.Data))) {
			return
		}
		g.accept(pi, m)
		p = &g.parts[pi]
		p.fresh = false
		took = true
	}
	g.skip(p, next)
	if p.next > 1 {
		p.fresh = false
	}
}

// skip passes offsets without records up to to, counting them as lost
// unless they precede the first record of a deliver-all group.
func (g *Group) skip(p *partition, to uint64) {
	n := p.skipTo(to, g.cfg.ReadAheadMsgs)
	if !p.fresh {
		g.counters.lost += n
	}
}

// accept takes one record into partition pi's window.
func (g *Group) accept(pi int32, m *Msg) {
	p := &g.parts[pi]
	g.counters.fetched++
	if m.Kind == KindData && g.cfg.Filter != nil && !g.cfg.Filter(m) {
		g.counters.filtered++
		p.next = m.Offset + 1
		p.finish(m.Offset)
		return
	}
	if m.Kind == KindMoveMarker && g.cfg.Ordering == OrderNone {
		p.next = m.Offset + 1
		p.finish(m.Offset) // no order to keep, nothing to wait for
		return
	}
	ei := g.allocEntry()
	di := g.deviceFor(m.Device)
	p = &g.parts[pi]
	g.entries[ei] = entry{msg: *m, part: pi, dev: di, member: noEntry, avoid: noMember,
		heapIdx: -1, laneNext: noEntry, queueNext: noEntry}
	p.slots[m.Offset&p.mask] = ei
	p.next = m.Offset + 1
	p.bytes += len(m.Data)
	p.held++
	g.held++
	g.devices[di].pending++
	if g.cfg.Ordering == OrderNone {
		g.pushReady(ei, false)
		return
	}
	g.appendToLane(di, ei)
	g.schedule(di)
}
