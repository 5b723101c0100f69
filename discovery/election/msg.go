package election

// MsgType is the kind of an election message.
type MsgType uint8

const (
	// MsgElection: the sender has no live leader for the group and runs an
	// election. It goes to every peer: higher-ranked ones ANSWER, the
	// sitting leader (of any rank) replies COORDINATOR.
	MsgElection MsgType = iota + 1
	// MsgAnswer: the sender ranks above the candidate and is alive; the
	// candidate stops and waits for a COORDINATOR.
	MsgAnswer
	// MsgCoordinator: the sender leads the group at Epoch (Epoch.Leader is
	// the sender). Sent when it becomes leader, every AnnounceInterval, to a
	// peer that comes up, and in reply to an ELECTION or a stale message.
	MsgCoordinator
	// MsgHandOver: the sender ranks above the leader of Epoch and asks it to
	// drain and confirm with DRAINED (safe hand-over).
	MsgHandOver
	// MsgDrained: the sender no longer leads; Epoch is the highest it has
	// seen. The answer to HANDOVER, once drained, or at once from a node
	// that does not lead.
	MsgDrained
)

func (t MsgType) String() string {
	switch t {
	case MsgElection:
		return "election"
	case MsgAnswer:
		return "answer"
	case MsgCoordinator:
		return "coordinator"
	case MsgHandOver:
		return "handover"
	case MsgDrained:
		return "drained"
	}
	return "unknown"
}

// Message is one election message of one group. The runner carries it on
// the authenticated peer connection to To and passes it to that node's
// Step. Messages may be lost, delayed or duplicated; the protocol copes
// (timeouts, periodic announcements, epochs).
type Message struct {
	Type  MsgType
	Group string
	From  NodeID
	To    NodeID
	// Epoch is the highest epoch the sender has seen for Group; for a
	// COORDINATOR that is the sender's own leadership.
	Epoch Epoch
	// Rank is the sender's rank in Group.
	Rank Rank
}
