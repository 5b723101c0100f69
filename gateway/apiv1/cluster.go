package apiv1

import "time"

// ClusterStatus is the cluster part of /v1/status.
type ClusterStatus struct {
	Name   string `json:"name"`
	Listen string `json:"listen"` // this node's peer listener
	// Peers are the connected peers (state up), sorted by node.
	Peers []PeerStatus `json:"peers"`
	// Unreachable are the addresses to dial (static or discovered) without
	// a connection: a peer that is down, or an address that never answered
	// (no node).
	Unreachable []AddrStatus `json:"unreachable"`
	// Leaders are keyed by group ("<filter> <queue>"); a group still being
	// elected has none.
	Leaders map[string]GroupLeader `json:"leaders"`
	Refused uint64                 `json:"refused_peers"` // = peer_events.refused_handshakes
	// PeerEvents, Election and DataPath are totals since the node started.
	PeerEvents PeerEvents     `json:"peer_events"`
	Election   ElectionEvents `json:"election"`
	DataPath   DataPathEvents `json:"data_path"`
}

// GroupLeader is one queue group's elected leader.
type GroupLeader struct {
	Leader string `json:"leader"`
	Epoch  string `json:"epoch"`
	Self   bool   `json:"self"`
}

// PeerEvents count what happened to peer connections.
type PeerEvents struct {
	// RefusedHandshakes: another cluster, or a wrong secret.
	RefusedHandshakes uint64 `json:"refused_handshakes"`
	// SendQueueOverflows: connections closed because the peer did not
	// keep up with what this node sent it.
	SendQueueOverflows uint64 `json:"send_queue_overflows"`
	Ups                uint64 `json:"ups"`
	Downs              uint64 `json:"downs"`
	// RefusedFrames: sealed peer frames that failed authentication
	// (altered, injected, dropped, reordered or replayed on the way).
	RefusedFrames uint64 `json:"refused_frames"`
	// BusyHandshakes: connections closed unread because too many were in
	// the handshake; FailedHandshakes: deadline, malformed or oversized.
	BusyHandshakes   uint64 `json:"busy_handshakes"`
	FailedHandshakes uint64 `json:"failed_handshakes"`
}

// ElectionEvents are the election machine's counters, over all groups.
type ElectionEvents struct {
	Elections   uint64 `json:"elections"`   // elections started
	Leaderships uint64 `json:"leaderships"` // leaderships won by this node
	// TakeOvers: hand-overs this node asked of a sitting leader as the
	// higher-ranked node; HandOverTimeouts: of those, completed without the
	// old leader's DRAINED.
	TakeOvers        uint64 `json:"take_overs"`
	HandOverTimeouts uint64 `json:"hand_over_timeouts"`
	// HandOvers: leaderships this node handed to a higher-ranked one;
	// DrainTimeouts: hand-overs given up waiting for the drain here.
	HandOvers     uint64 `json:"hand_overs"`
	DrainTimeouts uint64 `json:"drain_timeouts"`
	// Deposed: leaderships ended by a newer epoch (or the group removed).
	Deposed uint64 `json:"deposed"`
	// StaleCoordinators: COORDINATOR messages refused for an old epoch.
	StaleCoordinators uint64 `json:"stale_coordinators"`
	// Fenced: fetches and commits refused for an old epoch.
	Fenced uint64 `json:"fenced"`
}

// DataPathEvents count the queue groups' traffic between nodes.
type DataPathEvents struct {
	// ForwardsIn: deliveries other nodes' leaders forwarded to members
	// here; ForwardsRefused: of those, the ones no member here could take.
	ForwardsIn      uint64 `json:"forwards_in"`
	ForwardsRefused uint64 `json:"forwards_refused"`
	// AcksRelayed: acknowledgements of members here sent to the leader.
	AcksRelayed uint64 `json:"acks_relayed"`
	// RemoteCommits and RemoteCommitFailures: commits of offsets this
	// node, as a leader, stored at the partitions' owners.
	RemoteCommits        uint64 `json:"remote_commits"`
	RemoteCommitFailures uint64 `json:"remote_commit_failures"`
	// FencedRequests: requests of other nodes' leaders refused here (an
	// old epoch, as in election.fenced, or epochs that could not be stored).
	FencedRequests uint64 `json:"fenced_requests"`
}

// PeerStatus describes one connected peer.
type PeerStatus struct {
	Node        string    `json:"node"`
	Addr        string    `json:"addr"`
	Priority    int       `json:"priority"`
	Partitions  int       `json:"partitions"`
	LastSeen    time.Time `json:"last_seen"`
	Since       time.Time `json:"since"`
	Dialed      bool      `json:"dialed"`
	QueuedBytes int       `json:"queued_bytes"`
	FramesOut   uint64    `json:"frames_out"`
	FramesIn    uint64    `json:"frames_in"`
	BytesOut    uint64    `json:"bytes_out"`
	BytesIn     uint64    `json:"bytes_in"`
}

// AddrStatus is an address to dial (static, or found by discovery) that has
// no connection now.
type AddrStatus struct {
	Addr string `json:"addr"`
	// Node is the node the address led to when it was last dialed; "" if
	// it never answered the handshake.
	Node   string `json:"node,omitempty"`
	Static bool   `json:"static"`
}
