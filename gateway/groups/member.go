// Package groups runs the node's queue groups: a Registry of groups, and
// for each group this node delivers a runner — one goroutine that owns the
// group's core (gateway/queue, the pure state machine that decides), reads
// the log (wal) and other nodes' logs (through Peers), hands deliveries to
// members, takes their acknowledgements and commits offsets. It also runs
// the live tail of plain subscriptions. It speaks no protocol: a member is an
// interface that takes typed deliveries (a NATS subscription, a member on a
// peer node, later a JetStream consumer, an NSQ channel or an uplink), and
// acknowledgements come back as typed calls. Each front end encodes
// deliveries and parses acknowledgements in its own package.
//
// groups is the only door to the queue core: front ends, uplinks, the
// cluster layer and the configuration see groups' types (member IDs,
// deliveries, acks, group policies and statistics; types.go) and never
// import gateway/queue. groups itself imports no protocol: the subject
// grammar a group's filter is checked with is gateway/subject's.
package groups

import "edgeq/wal"

// Member receives deliveries. Deliver must not block: it copies what it needs
// (the Delivery is only valid during the call) into its outbound buffer, or
// returns false when it cannot take the message (its connection is closed or
// over its pending limit); the group then gives the message to another member.
type Member interface {
	Deliver(d *Delivery) bool
}

// Delivery is one stored record on its way to a member. Record's strings,
// headers and payload (and Raw) alias buffers that the member must not write
// and that are valid only during the call: a record forwarded by a peer is
// decoded in place from the connection's frame buffer, which is reused for
// the next frame once Deliver returns. A member copies what it keeps.
type Delivery struct {
	Record *wal.Record // device, seq, ingest time, source, headers, payload
	Raw    []byte      // the record as stored (a forward to a peer sends it as is)
	// Node and Partition name the log that stores the record (the owner in a
	// cluster) and Offset its place there.
	Node      string
	Partition int
	Offset    uint64
	// Deliveries counts this delivery (1 the first time); 0 for the live
	// tail, which takes no acknowledgements.
	Deliveries int
	// MaybeDelivered: a first delivery of this group's run whose record
	// may have been delivered before, by the run or leader before a crash
	// or failover (it was past the committed offsets). Workers that must
	// not process twice check these against what they did.
	MaybeDelivered bool
	// Ack identifies the delivery when the member acknowledges it; the zero
	// handle for the live tail.
	Ack AckHandle
}

// AckHandle names one delivery to one member. Front ends carry it to the
// worker in their own form (a reply subject, a message ID) and hand it back
// unchanged with the worker's answer; its fields are public only so that
// they can be encoded.
type AckHandle struct {
	Group      int      // the group's instance ID (one runner on one node)
	Member     MemberID // the member the message was delivered to
	Partition  int      // the partition ID in the group's core
	Offset     uint64
	Deliveries int
}

// IsZero reports whether h names no delivery (live tail).
func (h AckHandle) IsZero() bool { return h.Offset == 0 }
