package queue

// counters are cumulative since New.
type counters struct {
	fetched, lost, filtered                      uint64
	delivered, redeliveries, acked, naks, terms  uint64
	inProgress, timeouts, deadLetters, staleAcks uint64
	memberLeaveRequeues                          uint64
	stallsAvoided, setAside, asideBlocked        uint64
	evicted                                      uint64
}

// Stats is a snapshot for metrics and status pages.
type Stats struct {
	Members       int // current members
	ActiveMembers int // members with credit > 0
	InFlight      int // delivered, not yet acknowledged
	Pending       int // fetched, unfinished and not in flight (waiting, ready or nak-delayed)
	ActiveDevices int // devices with unfinished messages

	Fetched      uint64 // records accepted from storage (markers included)
	Lost         uint64 // offsets skipped by storage (retention, corrupt records)
	Filtered     uint64 // data records the filter rejected
	Delivered    uint64 // deliveries, redeliveries included
	Redeliveries uint64 // deliveries with a delivery count above 1
	Acked        uint64
	Naks         uint64
	Terms        uint64
	InProgress   uint64
	Timeouts     uint64 // ack_wait expiries
	LeaveRequeue uint64 // in-flight messages returned by members that left
	DeadLetters  uint64
	StaleAcks    uint64 // acknowledgements that matched no current delivery
	// StallsAvoided counts the times the reader went on past a device
	// instead of waiting for it: the device reached its share of a
	// partition's window (a run of set-aside records starts), or a record
	// of a device with a backlog was moved out of the window base (Evicted).
	StallsAvoided uint64
	SetAside      uint64 // records set aside (each is read again later)
	AsideBlocked  uint64 // times a partition stopped reading: its aside table was full
	// Evicted counts records of a device with a backlog moved out of the
	// way of the window's read-ahead (still held, read on past them).
	Evicted uint64

	Partitions []PartitionStats
	MemberList []MemberStats
}

// MemberStats describes one member.
type MemberStats struct {
	ID       MemberID
	Credit   int
	InFlight int
	Waiting  int // sticky strategy: messages waiting for this member's credit
}

// PartitionStats describes one partition's offset window.
type PartitionStats struct {
	Partition int
	Committed uint64 // everything up to here is finished (0: nothing yet)
	Next      uint64 // next offset to fetch
	Span      int    // Next - Committed - 1: offsets fetched and not committed
	Bytes     int    // len(Data) of unfinished records held
	Held      int    // unfinished records held: the window's occupancy (at most read-ahead)
	Busiest   int    // records held by the device that holds most of this window
	SetAside  int    // records set aside, to be read again
	Asides    int    // devices with records set aside or re-read
	Blocked   bool   // not read further: the aside table is full
	Fetching  bool
	Paused    bool
}

// Stats returns a snapshot. It allocates its slices; members are listed in
// join order (slots are reused after a leave).
// HasCredit reports whether a live member could take a delivery now (its
// in-flight count is below its credit).
func (g *Group) HasCredit() bool { return len(g.members.withCredit) > 0 }

func (g *Group) Stats() Stats {
	c := &g.counters
	s := Stats{
		Members:       len(g.members.byID),
		ActiveMembers: g.members.active,
		InFlight:      g.inFlight,
		ActiveDevices: len(g.deviceIdx),
		Fetched:       c.fetched,
		Lost:          c.lost,
		Filtered:      c.filtered,
		Delivered:     c.delivered,
		Redeliveries:  c.redeliveries,
		Acked:         c.acked,
		Naks:          c.naks,
		Terms:         c.terms,
		InProgress:    c.inProgress,
		Timeouts:      c.timeouts,
		LeaveRequeue:  c.memberLeaveRequeues,
		DeadLetters:   c.deadLetters,
		StaleAcks:     c.staleAcks,
		StallsAvoided: c.stallsAvoided,
		SetAside:      c.setAside,
		AsideBlocked:  c.asideBlocked,
		Evicted:       c.evicted,
		Partitions:    make([]PartitionStats, 0, len(g.parts)),
	}
	for i := range g.parts {
		p := &g.parts[i]
		ps := PartitionStats{Partition: p.id, Next: p.next, Bytes: p.bytes, Fetching: p.fetching, Paused: p.paused,
			Held: p.held, Asides: len(p.aside), Blocked: p.blocked}
		if !p.fromEnd {
			f := p.floor()
			ps.Committed = f - 1
			ps.Span = int(p.next - f)
		}
		for _, a := range p.aside {
			ps.SetAside += a.n
		}
		s.Partitions = append(s.Partitions, ps)
	}
	for _, di := range g.deviceIdx {
		for _, ln := range g.devices[di].lanes {
			if ps := &s.Partitions[ln.part]; int(ln.n) > ps.Busiest {
				ps.Busiest = int(ln.n)
			}
		}
	}
	s.Pending = g.held - g.inFlight
	for slot := range g.members.slots {
		if m := &g.members.slots[slot]; m.live {
			s.MemberList = append(s.MemberList, MemberStats{ID: m.id, Credit: m.credit, InFlight: m.inFlight, Waiting: m.queue.n})
		}
	}
	return s
}
