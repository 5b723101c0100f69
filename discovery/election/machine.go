package election

import (
	"fmt"
	"slices"
)

// Role is a node's part in the election of one group.
type Role uint8

const (
	// RoleFollower follows a live leader (Status.Leader).
	RoleFollower Role = iota
	// RoleCandidate knows no live leader: it has sent ELECTION and waits for
	// an ANSWER (AnswerTimeout), or has had one and waits for the
	// COORDINATOR (CoordinatorTimeout). An old leader that has handed over
	// also waits here for its successor's COORDINATOR.
	RoleCandidate
	// RoleTakingOver ranks above the sitting leader (Status.Leader) and has
	// asked it to hand over; it leads once DRAINED arrives, the old leader
	// goes down, or HandOverTimeout passes.
	RoleTakingOver
	// RoleLeader leads the group at Status.Epoch.
	RoleLeader
	// RoleHandingOver led the group and drains for its successor
	// (Status.Target) until the runner calls Drained, or HandOverTimeout
	// passes (then it waits as a candidate for the successor, which takes
	// over by its own timeout).
	RoleHandingOver
)

func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleCandidate:
		return "candidate"
	case RoleTakingOver:
		return "taking-over"
	case RoleLeader:
		return "leader"
	case RoleHandingOver:
		return "handing-over"
	}
	return "unknown"
}

// Status is the state of one group, for status pages and tests.
type Status struct {
	Role Role
	// Leader: the leader this node believes in (itself when leading or
	// handing over; the old leader while taking over); empty if none.
	Leader NodeID
	// Epoch: the highest epoch seen (the leader's, when Leader is set).
	Epoch Epoch
	// Target: the old leader (taking over) or the successor (handing over).
	Target NodeID
	// Answered: a candidate that had an ANSWER and waits for a COORDINATOR.
	Answered bool
}

// Stats counts what the machine did, over all groups.
type Stats struct {
	Elections        uint64 // elections started
	Leaderships      uint64 // BecomeLeader emitted
	TakeOvers        uint64 // hand-overs requested by this node as the higher-ranked one
	HandOverTimeouts uint64 // take-overs completed without the old leader's DRAINED
	HandOvers        uint64 // StepDown with HandOver emitted (this node drained for a successor)
	DrainTimeouts    uint64 // hand-overs given up waiting for Drained
	Deposed          uint64 // StepDown without HandOver: a newer epoch seen, or group removed
	Stale            uint64 // COORDINATOR messages refused for a stale epoch
	Fenced           uint64 // Fence refusals
}

type group struct {
	name     string
	self     Rank // this node's rank in the group
	role     Role
	highest  Epoch  // highest epoch seen; persisted (dirty until emitted)
	leader   NodeID // "" or highest.Leader (a live peer), or self when leading
	answered bool   // candidate: a higher node answered
	timer    int    // ticks left: candidate, taking over; leader: until the next announcement
	target   NodeID // taking over: old leader; handing over: successor
	tgtRank  Rank   // handing over: the successor's rank
	dirty    bool   // highest changed since the last Persist
}

// Machine is the bully election of a leader per queue group on one node. It
// is a pure, deterministic state machine and not safe for concurrent use:
// one goroutine (the runner) feeds it inputs — AddGroup, RemoveGroup,
// PeerUp, PeerDown, Tick, Step, Drained, Fence — and after each batch calls
// Ready and carries the result out in the order Ready's comment states. It
// does no I/O, reads no clock and uses no randomness.
type Machine struct {
	cfg       Config
	peers     map[NodeID]int // live peers and their priorities
	peerOrder []NodeID       // sorted keys of peers (deterministic broadcasts)
	groups    map[string]*group
	order     []string // sorted group names
	out       Ready
	stats     Stats
}

// New returns a machine for cfg with no groups and no peers. After a restart,
// add each group with the epoch persisted for it (AddGroup), so epochs never
// go backwards.
func New(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{cfg: cfg, peers: map[NodeID]int{}, groups: map[string]*group{}}, nil
}

// ID returns this node's ID.
func (m *Machine) ID() NodeID { return m.cfg.ID }

// AddGroup starts electing a leader for group. persisted is the last epoch
// stored for it by a Persist action (the zero Epoch for a new group): keep
// the record when a group is removed, since re-adding it with an older
// epoch would let a stale leader through. The node starts as a candidate.
func (m *Machine) AddGroup(name string, persisted Epoch) error {
	switch {
	case !validName(name):
		return fmt.Errorf("election: add group %q: %w", name, ErrBadName)
	case !persisted.IsZero() && !persisted.valid():
		return fmt.Errorf("election: add group %q: %w: %v", name, ErrBadEpoch, persisted)
	case m.groups[name] != nil:
		return fmt.Errorf("election: add group %q: %w", name, ErrGroupExists)
	case len(m.groups) >= m.cfg.MaxGroups:
		return fmt.Errorf("election: add group %q: %w (%d)", name, ErrTooManyGroups, m.cfg.MaxGroups)
	}
	g := &group{name: name, self: RankOf(m.cfg.ID, m.cfg.Priority, name), highest: persisted}
	m.groups[name] = g
	i, _ := slices.BinarySearch(m.order, name)
	m.order = slices.Insert(m.order, i, name)
	m.evaluate(g)
	return nil
}

// RemoveGroup stops electing for group. A leader steps down (StepDown
// without HandOver); an epoch not yet persisted is emitted first.
func (m *Machine) RemoveGroup(name string) error {
	g := m.groups[name]
	if g == nil {
		return fmt.Errorf("election: remove group %q: %w", name, ErrUnknownGroup)
	}
	if g.role == RoleLeader {
		m.stepDown(g, false)
	}
	if g.dirty {
		m.out.Persist = append(m.out.Persist, Persist{Group: name, Epoch: g.highest})
	}
	delete(m.groups, name)
	i, _ := slices.BinarySearch(m.order, name)
	m.order = slices.Delete(m.order, i, i+1)
	return nil
}

// PeerUp reports that node is alive (connected and authenticated) with the
// given priority, or that its priority changed. A leader announces itself
// to it; a candidate sends it ELECTION.
func (m *Machine) PeerUp(node NodeID, priority int) error {
	switch {
	case !validName(string(node)) || node == m.cfg.ID:
		return fmt.Errorf("election: peer up %q: %w", node, ErrBadName)
	case len(m.peers) >= m.cfg.MaxPeers && !m.alive(node):
		return fmt.Errorf("election: peer up %q: %w (%d)", node, ErrTooManyPeers, m.cfg.MaxPeers)
	}
	if !m.alive(node) {
		i, _ := slices.BinarySearch(m.peerOrder, node)
		m.peerOrder = slices.Insert(m.peerOrder, i, node)
	}
	m.peers[node] = priority
	for _, name := range m.order {
		g := m.groups[name]
		switch {
		case g.role == RoleLeader:
			m.send(g, MsgCoordinator, node)
		case g.role == RoleCandidate && !g.answered:
			m.send(g, MsgElection, node)
		}
		m.evaluate(g)
	}
	return nil
}

// PeerDown reports that node is dead (the failure detector's verdict).
// Groups it led elect again; a take-over waiting for it completes at once.
func (m *Machine) PeerDown(node NodeID) error {
	if !m.alive(node) {
		return fmt.Errorf("election: peer down %q: %w", node, ErrUnknownPeer)
	}
	delete(m.peers, node)
	i, _ := slices.BinarySearch(m.peerOrder, node)
	m.peerOrder = slices.Delete(m.peerOrder, i, i+1)
	for _, name := range m.order {
		g := m.groups[name]
		switch {
		case g.role == RoleFollower && g.leader == node:
			g.leader = ""
		case g.role == RoleTakingOver && g.target == node:
			m.lead(g)
		}
		m.evaluate(g)
	}
	return nil
}

// Tick advances time by one tick: candidates, take-overs and hand-overs
// time out, leaders repeat their announcement.
func (m *Machine) Tick() {
	for _, name := range m.order {
		g := m.groups[name]
		switch g.role {
		case RoleCandidate:
			if g.timer--; g.timer > 0 {
				continue
			}
			if g.answered { // the higher node never announced itself
				m.startElection(g)
			} else {
				m.win(g)
			}
		case RoleTakingOver:
			if g.timer--; g.timer <= 0 {
				m.stats.HandOverTimeouts++
				m.lead(g)
			}
		case RoleLeader:
			if g.timer--; g.timer <= 0 {
				m.broadcast(g, MsgCoordinator)
				g.timer = m.cfg.AnnounceInterval
			}
		case RoleHandingOver:
			// The drain outlasts the hand-over timeout: the successor leads
			// by its own timeout by now (or is gone). Stop waiting.
			if g.timer--; g.timer <= 0 {
				m.stats.DrainTimeouts++
				g.role, g.leader, g.answered, g.timer = RoleCandidate, "", true, m.cfg.CoordinatorTimeout
				g.target, g.tgtRank = "", Rank{}
			}
		}
	}
}

// Drained reports that the runner has drained group after a StepDown with
// HandOver at epoch. The successor is told (DRAINED) and this node waits
// for its COORDINATOR.
func (m *Machine) Drained(name string, epoch Epoch) error {
	g := m.groups[name]
	switch {
	case g == nil:
		return fmt.Errorf("election: drained %q: %w", name, ErrUnknownGroup)
	case g.role != RoleHandingOver || g.highest != epoch:
		return fmt.Errorf("election: drained %q at %v: %w", name, epoch, ErrNotHandingOver)
	}
	succ := g.target
	g.target, g.tgtRank = "", Rank{}
	if !m.alive(succ) {
		m.startElection(g)
		return nil
	}
	m.send(g, MsgDrained, succ)
	g.role, g.leader, g.answered, g.timer = RoleCandidate, "", true, m.cfg.CoordinatorTimeout
	return nil
}

// Ready returns the work produced since the previous call (see Ready for
// the order in which the runner must carry it out). It emits one Persist
// per group whose epoch changed. Call it after every batch of inputs.
func (m *Machine) Ready() Ready {
	for _, name := range m.order {
		if g := m.groups[name]; g.dirty {
			m.out.Persist = append(m.out.Persist, Persist{Group: name, Epoch: g.highest})
			g.dirty = false
		}
	}
	rd := m.out
	m.out = Ready{}
	return rd
}

// HasReady reports whether Ready would return any work.
func (m *Machine) HasReady() bool {
	if !m.out.Empty() {
		return true
	}
	for _, g := range m.groups {
		if g.dirty {
			return true
		}
	}
	return false
}

// Leader returns the leader of group as this node sees it and its epoch;
// ok is false when the group is unknown or no leader is known (an election
// is running).
func (m *Machine) Leader(name string) (leader NodeID, epoch Epoch, ok bool) {
	g := m.groups[name]
	if g == nil || g.leader == "" {
		return "", Epoch{}, false
	}
	return g.leader, g.highest, true
}

// Status returns the state of group; ok is false for an unknown group.
func (m *Machine) Status(name string) (st Status, ok bool) {
	g := m.groups[name]
	if g == nil {
		return Status{}, false
	}
	return Status{Role: g.role, Leader: g.leader, Epoch: g.highest, Target: g.target, Answered: g.answered}, true
}

// Groups returns the group names in order.
func (m *Machine) Groups() []string { return slices.Clone(m.order) }

// Peers returns the live peers in order.
func (m *Machine) Peers() []NodeID { return slices.Clone(m.peerOrder) }

// Stats returns the counters.
func (m *Machine) Stats() Stats { return m.stats }

func (m *Machine) alive(n NodeID) bool {
	_, ok := m.peers[n]
	return ok
}

// peerRank returns the rank of a live peer in g.
func (m *Machine) peerRank(g *group, n NodeID) Rank { return RankOf(n, m.peers[n], g.name) }

// best reports whether this node ranks above every live peer in g.
func (m *Machine) best(g *group) bool {
	for _, p := range m.peerOrder {
		if m.peerRank(g, p).Above(g.self) {
			return false
		}
	}
	return true
}
