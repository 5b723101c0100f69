package queue

// counters are cumulative since New.
type counters struct {
	fetched, lost, filtered                      uint64
	delivered, redeliveries, acked, naks, terms  uint64
	inProgress, timeouts, deadLetters, staleAcks uint64
	memberLeaveRequeues                          uint64
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
	Fetching  bool
	Paused    bool
}

// Stats returns a snapshot. It allocates its slices; members are listed in
// join order (slots are reused after a leave).
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
		Partitions:    make([]PartitionStats, 0, len(g.parts)),
	}
	for i := range g.parts {
		p := &g.parts[i]
		ps := PartitionStats{Partition: p.id, Next: p.next, Bytes: p.bytes, Fetching: p.fetching, Paused: p.paused}
		if !p.fromEnd {
			ps.Committed = p.base - 1
			ps.Span = p.span()
		}
		s.Partitions = append(s.Partitions, ps)
	}
	s.Pending = g.held - g.inFlight
	for slot := range g.members.slots {
		if m := &g.members.slots[slot]; m.live {
			s.MemberList = append(s.MemberList, MemberStats{ID: m.id, Credit: m.credit, InFlight: m.inFlight, Waiting: m.queue.n})
		}
	}
	return s
}
