package queue

// partition is the read position and offset window of one partition.
//
// The window covers offsets [base, next): fetched, and not all finished.
// Everything below base is finished, so base-1 is the committable offset.
// slots is a ring indexed by offset: the entry of an unfinished record, or
// noEntry once the offset is finished (acked, dead-lettered, filtered out,
// a passed marker, or lost to retention). next-base never exceeds
// Config.ReadAheadMsgs, which bounds the ring.
//
// Records a device could not hold beyond its share of the window (see
// aside.go) are set aside: their ring slots count as done, so base moves past
// them, but they are unfinished. They are tracked as one offset range per
// device in aside, and when read again they live in side (by offset), not in
// the ring. The committable offset is floor()-1: below base, below every
// set-aside range and below every re-read record.
type partition struct {
	id        int
	base      uint64
	next      uint64
	slots     []int32
	mask      uint64
	bytes     int    // len(Data) of the unfinished records in the window
	held      int    // unfinished records held (ring and side); at most Config.ReadAheadMsgs
	released  int    // of them, those whose data was dropped after delivery (ReleaseDelivered)
	committed uint64 // offset of the last Commit emitted, or the start position - 1
	// highDelivered: the highest offset delivered by this group (a draining
	// group's mark, drain.go).
	highDelivered uint64
	// forceCommit emits a Commit even without progress: set when a
	// deliver-new start point is resolved, so the runner persists it.
	forceCommit bool
	fetching    bool // a Fetch is outstanding
	paused      bool // its messages are not delivered (see Group.Pause)
	fromEnd     bool // no position yet, deliver new: the next Fetch asks for the end
	fresh       bool // no position yet, deliver all: a leading gap is not "lost"

	aside      []aside          // devices with records set aside or re-read; bound: Config.MaxAsideDevices
	side       map[uint64]int32 // re-read records by offset; bound: Config.ReadAheadMsgs (counted in held)
	refetching bool             // a Refetch is outstanding, for device refetchDev
	refetchDev int32
	// blocked: reading stopped at a record that should be set aside while
	// the aside table is full; it resumes when an aside entry ends.
	blocked bool
}

func newPartition(id int, start uint64, cfg *Config) partition {
	size := 1
	for size < cfg.ReadAheadMsgs {
		size <<= 1
	}
	p := partition{id: id, slots: make([]int32, size), mask: uint64(size - 1)}
	switch {
	case start > 0:
		p.base, p.next, p.committed = start, start, start-1
	case cfg.Deliver == DeliverAll:
		p.base, p.next, p.fresh = 1, 1, true
	default:
		p.fromEnd = true // base = next = 0 until the end is known
	}
	return p
}

func (p *partition) span() int { return int(p.next - p.base) }

// finish marks off finished and moves base past every finished offset.
func (p *partition) finish(off uint64) {
	p.slots[off&p.mask] = noEntry
	for p.base < p.next && p.slots[p.base&p.mask] == noEntry {
		p.base++
	}
}

// skipTo marks offsets [next, to) finished without records (lost to
// retention or skipped by storage) as far as the window allows and returns
// how many it skipped. With nothing unfinished in the window it jumps, so a
// large gap costs no slots.
func (p *partition) skipTo(to uint64, readAhead int) uint64 {
	from := p.next
	if to <= from {
		return 0
	}
	if p.base == p.next {
		p.base, p.next = to, to
		return to - from
	}
	for p.next < to && p.span() < readAhead {
		p.slots[p.next&p.mask] = noEntry
		p.next++
	}
	return p.next - from
}

// floor is the lowest unfinished offset (or base when everything held is
// finished): set-aside and re-read records count.
func (p *partition) floor() uint64 {
	f := p.base
	for i := range p.aside {
		a := &p.aside[i]
		if a.sides > 0 && a.sideLow < f {
			f = a.sideLow
		}
		if a.lo <= a.hi && a.lo < f {
			f = a.lo
		}
	}
	return f
}

func (p *partition) commitDue() bool {
	return !p.fromEnd && (p.forceCommit || p.floor()-1 > p.committed)
}

// fetchDue reports whether the partition should be read now.
func (g *Group) fetchDue(p *partition) bool {
	if p.fetching || g.draining || g.drained {
		return false
	}
	if p.fromEnd {
		return true
	}
	if p.blocked || g.full(p) {
		return false
	}
	if p.span() < g.cfg.ReadAheadMsgs {
		return true
	}
	_, _, ok := g.evictable(g.partIdx[p.id])
	return ok
}

func (g *Group) collectFetches(out *Ready) {
	for i := range g.parts {
		p := &g.parts[i]
		if !g.fetchDue(p) {
			continue
		}
		for p.span() >= g.cfg.ReadAheadMsgs && g.evictBase(int32(i)) {
		}
		p.fetching = true
		if p.fromEnd {
			out.Fetch = append(out.Fetch, Fetch{Partition: p.id, End: true})
			continue
		}
		maxMsgs, maxBytes := g.fetchLimits(p, g.cfg.ReadAheadMsgs-max(p.span(), p.held), g.cfg.ReadAheadBytes-p.bytes)
		out.Fetch = append(out.Fetch, Fetch{
			Partition: p.id,
			From:      p.next,
			MaxMsgs:   maxMsgs,
			MaxBytes:  maxBytes,
		})
	}
	g.collectRefetches(out)
}

func (g *Group) collectCommits(out *Ready) {
	for i := range g.parts {
		p := &g.parts[i]
		if !p.commitDue() {
			continue
		}
		p.committed = p.floor() - 1
		p.forceCommit = false
		out.Commit = append(out.Commit, Commit{Partition: p.id, Offset: p.committed})
	}
}
