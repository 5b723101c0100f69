package election

import "fmt"

// Step handles a message from a peer. Every message first raises this node's
// highest epoch to the message's (a leader that sees a newer epoch steps
// down); then its type decides. A COORDINATOR older than the highest epoch
// seen is refused with ErrStaleEpoch (and answered with this node's own
// COORDINATOR if it leads, so the stale leader learns at once).
func (m *Machine) Step(msg Message) error {
	g := m.groups[msg.Group]
	switch {
	case g == nil:
		return fmt.Errorf("election: step %v from %q: %w %q", msg.Type, msg.From, ErrUnknownGroup, msg.Group)
	case msg.To != m.cfg.ID || msg.From == m.cfg.ID || !validName(string(msg.From)):
		return fmt.Errorf("election: step %v from %q to %q: %w: wrong addressee", msg.Type, msg.From, msg.To, ErrBadMessage)
	case msg.Rank.Node != msg.From || msg.Rank.Hash != RendezvousHash(msg.From, msg.Group):
		return fmt.Errorf("election: step %v from %q: %w: rank %v does not match", msg.Type, msg.From, ErrBadMessage, msg.Rank)
	case !msg.Epoch.IsZero() && !msg.Epoch.valid():
		return fmt.Errorf("election: step %v from %q: %w: %w %v", msg.Type, msg.From, ErrBadMessage, ErrBadEpoch, msg.Epoch)
	case msg.Type == MsgCoordinator && msg.Epoch.Leader != msg.From:
		return fmt.Errorf("election: step coordinator from %q: %w: epoch %v names another leader", msg.From, ErrBadMessage, msg.Epoch)
	case msg.Type < MsgElection || msg.Type > MsgDrained:
		return fmt.Errorf("election: step from %q: %w: type %d", msg.From, ErrBadMessage, msg.Type)
	}
	if msg.Type == MsgCoordinator && msg.Epoch.Compare(g.highest) < 0 {
		m.stats.Stale++
		if g.role == RoleLeader {
			m.send(g, MsgCoordinator, msg.From)
		}
		return fmt.Errorf("election: step coordinator %s from %q: %w: highest seen %v", msg.Epoch, msg.From, ErrStaleEpoch, g.highest)
	}
	m.observe(g, msg.Epoch)
	switch msg.Type {
	case MsgElection:
		m.onElection(g, msg)
	case MsgAnswer:
		if g.role == RoleCandidate && !g.answered && msg.Rank.Above(g.self) {
			g.answered, g.timer = true, m.cfg.CoordinatorTimeout
		}
	case MsgCoordinator:
		m.onCoordinator(g, msg)
	case MsgHandOver:
		m.onHandOver(g, msg)
	case MsgDrained:
		if g.role == RoleTakingOver && msg.From == g.target && msg.Epoch == g.highest {
			m.lead(g)
		}
	}
	m.evaluate(g)
	return nil
}

func (m *Machine) onElection(g *group, msg Message) {
	switch {
	case g.role == RoleLeader:
		m.send(g, MsgCoordinator, msg.From)
		return
	case g.role == RoleFollower && g.leader == msg.From:
		// Our leader runs an election, so it does not lead (it restarted
		// before the failure detector noticed): elect again (evaluate).
		g.leader = ""
	}
	if g.self.Above(msg.Rank) {
		m.send(g, MsgAnswer, msg.From)
	}
}

// onCoordinator handles a COORDINATOR at the highest epoch seen (observe has
// raised it if it was newer), so msg.From leads at g.highest.
func (m *Machine) onCoordinator(g *group, msg Message) {
	switch g.role {
	case RoleFollower, RoleCandidate:
		g.role, g.leader, g.answered = RoleFollower, msg.From, false
	case RoleTakingOver:
		// Still leading: the request was lost or refused.
		if msg.Rank.Above(g.self) {
			g.role = RoleFollower // it outranks us after all (views differed)
		} else {
			m.send(g, MsgHandOver, msg.From)
		}
	}
}

func (m *Machine) onHandOver(g *group, msg Message) {
	switch g.role {
	case RoleLeader:
		if msg.Epoch != g.highest || !msg.Rank.Above(g.self) {
			m.send(g, MsgCoordinator, msg.From) // refused: tell it who leads
			return
		}
		g.role, g.target, g.tgtRank, g.timer = RoleHandingOver, msg.From, msg.Rank, m.cfg.HandOverTimeout
		m.stats.HandOvers++
		m.stepDown(g, true)
	case RoleHandingOver:
		if msg.Rank.Above(g.tgtRank) { // the highest-ranked requester succeeds
			g.target, g.tgtRank = msg.From, msg.Rank
		}
	default:
		m.send(g, MsgDrained, msg.From) // not leading: nothing to drain
	}
}

// observe raises g's highest epoch to e if e is newer. A node that led, took
// over or handed over at an older epoch becomes a follower of e's leader
// (if that is a live peer; otherwise evaluate starts an election); a leader
// steps down at once (StepDown without HandOver). It reports whether e was
// newer.
func (m *Machine) observe(g *group, e Epoch) bool {
	if e.Compare(g.highest) <= 0 {
		return false
	}
	if g.role == RoleLeader {
		m.stepDown(g, false)
	}
	g.highest, g.dirty = e, true
	leader := e.Leader
	if !m.alive(leader) {
		leader = ""
	}
	if g.role != RoleCandidate || leader != "" {
		g.role, g.answered = RoleFollower, false
	}
	g.target, g.tgtRank = "", Rank{}
	if g.role == RoleFollower {
		g.leader = leader
	}
	return true
}

// evaluate acts on a follower's view: without a live leader it starts an
// election (a leader that is not a live peer, e.g. one whose late message
// arrived after the failure detector declared it dead, is not followed); if
// it ranks above the leader and above every live peer it takes over (safe
// hand-over).
func (m *Machine) evaluate(g *group) {
	if g.role != RoleFollower {
		return
	}
	switch {
	case g.leader == "" || !m.alive(g.leader):
		m.startElection(g)
	case g.self.Above(m.peerRank(g, g.leader)) && m.best(g):
		m.startTakeOver(g, g.leader)
	}
}

func (m *Machine) startElection(g *group) {
	g.role, g.leader, g.answered, g.timer = RoleCandidate, "", false, m.cfg.AnswerTimeout
	g.target, g.tgtRank = "", Rank{}
	m.stats.Elections++
	m.broadcast(g, MsgElection)
}

// win ends an election that no higher node answered. If the leader of the
// highest epoch is a live peer it may still be leading (its COORDINATOR may
// have been lost), so ask it to hand over; it answers DRAINED at once if it
// does not lead.
func (m *Machine) win(g *group) {
	if l := g.highest.Leader; l != m.cfg.ID && m.alive(l) {
		m.startTakeOver(g, l)
		return
	}
	m.lead(g)
}

func (m *Machine) startTakeOver(g *group, old NodeID) {
	g.role, g.leader, g.target, g.answered, g.timer = RoleTakingOver, old, old, false, m.cfg.HandOverTimeout
	m.stats.TakeOvers++
	m.send(g, MsgHandOver, old)
}

// lead makes this node the leader at one above the highest epoch seen.
func (m *Machine) lead(g *group) {
	g.highest, g.dirty = Epoch{N: g.highest.N + 1, Leader: m.cfg.ID}, true
	g.role, g.leader, g.answered, g.timer = RoleLeader, m.cfg.ID, false, m.cfg.AnnounceInterval
	g.target, g.tgtRank = "", Rank{}
	m.stats.Leaderships++
	m.out.Changes = append(m.out.Changes, Change{Kind: BecomeLeader, Group: g.name, Epoch: g.highest})
	m.broadcast(g, MsgCoordinator)
}

// stepDown emits the StepDown of g's current leadership.
func (m *Machine) stepDown(g *group, handOver bool) {
	if !handOver {
		m.stats.Deposed++
	}
	m.out.Changes = append(m.out.Changes, Change{Kind: StepDown, Group: g.name, Epoch: g.highest, HandOver: handOver})
}

func (m *Machine) send(g *group, t MsgType, to NodeID) {
	m.out.Messages = append(m.out.Messages, Message{
		Type: t, Group: g.name, From: m.cfg.ID, To: to, Epoch: g.highest, Rank: g.self,
	})
}

func (m *Machine) broadcast(g *group, t MsgType) {
	for _, p := range m.peerOrder {
		m.send(g, t, p)
	}
}
