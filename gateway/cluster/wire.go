package cluster

import (
	"encoding/binary"
	"fmt"

	"edgeq/discovery/election"
	"edgeq/gateway/groups"
)

// Data-path messages between nodes. Each is the body of one frame; fields are
// uvarints and length-prefixed byte strings (see fields). Decoders alias the
// body they are given: copy it first when the frame's buffer is reused.
//
//	POSITION   leader → owner: where does group G start in each of your partitions?
//	POSITIONED owner → leader: next offset per partition (the owner records a
//	           start for a group new to it, by its deliver policy)
//	FETCH      leader → owner: records of partition P from offset F (long poll)
//	FETCHED    owner → leader: the records, raw as stored, and the next offset
//	COMMIT     leader → owner: offsets finished for G; COMMITTED confirms
//	FORWARD    leader → member's node: a delivery for one of its members (the
//	           record as stored, where it is stored, the leader's ack handle),
//	           or a dead letter for the node's subscribers
//	ACK        member's node → leader: a worker's acknowledgement (handle, kind)
//	MEMBERS    any node → every peer: its members of G (the whole set)
//	REMOVED    any node → every peer: G was deleted (edgeq groups rm): forget it
//
// POSITION, FETCH and COMMIT carry the leader's epoch; the owner fences it
// (election.Machine.Fence) before serving.

// Limits of decoded messages.
const (
	maxGroupField   = 1024 // subject filter or queue name
	maxSubject      = 4096
	maxMemberID     = 256
	maxMembersInMsg = 8192
	maxPartitions   = 4096
	maxRecordsInMsg = 1 << 16
	maxErrText      = 1024
)

// GroupName names a queue group on the wire.
type GroupName struct {
	Filter, Queue string
}

// PositionReq asks an owner for a group's start in all its partitions.
type PositionReq struct {
	ID    uint64
	Group GroupName
	Epoch election.Epoch
	// DeliverAll: a group new to the owner starts at its first record
	// (deliver: all) rather than after its last (deliver: new).
	DeliverAll bool
}

// PositionResp answers a PositionReq: Next[p] is the next offset to read in
// partition p, or Err.
type PositionResp struct {
	ID   uint64
	Err  string
	Next []uint64
}

// FetchReq asks for records of one partition from offset From on, at most
// MaxMsgs records and about MaxBytes; the owner holds the request up to
// WaitMillis for new durable records.
type FetchReq struct {
	ID         uint64
	Group      GroupName
	Epoch      election.Epoch
	Partition  int
	From       uint64
	MaxMsgs    int
	MaxBytes   int
	WaitMillis int
}

// RawRecord is one stored record at its offset: the record a leader's
// runner decodes (groups.RemoteRecord, so a fetched batch goes to it as
// decoded from the frame, not copied).
type RawRecord = groups.RemoteRecord

// FetchResp answers a FetchReq: records in offset order and the next offset
// to read (after trailing skipped offsets too), the partition's durable
// offset (for lag), or Err.
type FetchResp struct {
	ID      uint64
	Err     string
	Next    uint64
	Durable uint64
	Records []RawRecord
}

// PartitionOffset is a committed offset of one partition.
type PartitionOffset struct {
	Partition int
	Offset    uint64
}

// CommitReq stores committed offsets at their owner. With Sync the owner
// makes them durable before it confirms (a hand-over's final commits);
// otherwise soon after (the owner flushes its offsets periodically).
type CommitReq struct {
	ID      uint64
	Group   GroupName
	Epoch   election.Epoch
	Sync    bool
	Offsets []PartitionOffset
}

// CommitResp confirms a CommitReq (Err empty) or refuses it.
type CommitResp struct {
	ID  uint64
	Err string
}

// Forward is a delivery for Member on the receiving node or, with Member
// empty, a dead letter (Reason) for the receiving node's subscribers: the
// record as its owner stores it, where it is stored, and the leader's ack
// handle (Instance, CorePartition, Offset, Deliveries).
type Forward struct {
	Group         GroupName
	Member        string
	Reason        string
	Instance      uint64
	CorePartition uint64
	Node          string
	Partition     uint64
	Offset        uint64
	Deliveries    uint64
	Maybe         bool // groups.Delivery.MaybeDelivered
	Record        []byte
}

// AckRelay is a worker's acknowledgement taken on the member's node, for the
// leader that made the delivery: its ack handle, the kind (the relaying
// node's groups.AckKind) and a nak's delay in nanoseconds.
type AckRelay struct {
	Instance      uint64
	Member        string
	CorePartition uint64
	Offset        uint64
	Deliveries    uint64
	Kind          uint64
	Delay         uint64
}

// MemberInfo is one member and its credit.
type MemberInfo struct {
	ID     string
	Credit int
}

// Members is the complete set of the sender's members of a group.
type Members struct {
	Group      GroupName
	DeliverAll bool
	Declared   bool
	Members    []MemberInfo
}

// --- encoding ---

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendGroup(dst []byte, g GroupName) []byte {
	return appendString(appendString(dst, g.Filter), g.Queue)
}

func appendEpoch(dst []byte, e election.Epoch) []byte {
	dst = binary.AppendUvarint(dst, e.N)
	return appendString(dst, string(e.Leader))
}

// AppendPositionReq encodes m.
func AppendPositionReq(dst []byte, m *PositionReq) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	dst = appendGroup(dst, m.Group)
	dst = appendEpoch(dst, m.Epoch)
	return appendBool(dst, m.DeliverAll)
}

// AppendPositionResp encodes m.
func AppendPositionResp(dst []byte, m *PositionResp) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	dst = appendString(dst, m.Err)
	dst = binary.AppendUvarint(dst, uint64(len(m.Next)))
	for _, n := range m.Next {
		dst = binary.AppendUvarint(dst, n)
	}
	return dst
}

// AppendFetchReq encodes m.
func AppendFetchReq(dst []byte, m *FetchReq) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	dst = appendGroup(dst, m.Group)
	dst = appendEpoch(dst, m.Epoch)
	dst = binary.AppendUvarint(dst, uint64(m.Partition))
	dst = binary.AppendUvarint(dst, m.From)
	dst = binary.AppendUvarint(dst, uint64(m.MaxMsgs))
	dst = binary.AppendUvarint(dst, uint64(m.MaxBytes))
	return binary.AppendUvarint(dst, uint64(m.WaitMillis))
}

// AppendFetchResp encodes m.
func AppendFetchResp(dst []byte, m *FetchResp) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	dst = appendString(dst, m.Err)
	dst = binary.AppendUvarint(dst, m.Next)
	dst = binary.AppendUvarint(dst, m.Durable)
	dst = binary.AppendUvarint(dst, uint64(len(m.Records)))
	for _, r := range m.Records {
		dst = binary.AppendUvarint(dst, r.Offset)
		dst = appendField(dst, r.Raw)
	}
	return dst
}

// AppendCommitReq encodes m.
func AppendCommitReq(dst []byte, m *CommitReq) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	dst = appendGroup(dst, m.Group)
	dst = appendEpoch(dst, m.Epoch)
	dst = appendBool(dst, m.Sync)
	dst = binary.AppendUvarint(dst, uint64(len(m.Offsets)))
	for _, o := range m.Offsets {
		dst = binary.AppendUvarint(dst, uint64(o.Partition))
		dst = binary.AppendUvarint(dst, o.Offset)
	}
	return dst
}

// AppendCommitResp encodes m.
func AppendCommitResp(dst []byte, m *CommitResp) []byte {
	dst = binary.AppendUvarint(dst, m.ID)
	return appendString(dst, m.Err)
}

// AppendForward encodes m.
func AppendForward(dst []byte, m *Forward) []byte {
	dst = appendGroup(dst, m.Group)
	dst = appendString(dst, m.Member)
	dst = appendString(dst, m.Reason)
	dst = binary.AppendUvarint(dst, m.Instance)
	dst = binary.AppendUvarint(dst, m.CorePartition)
	dst = appendString(dst, m.Node)
	dst = binary.AppendUvarint(dst, m.Partition)
	dst = binary.AppendUvarint(dst, m.Offset)
	dst = binary.AppendUvarint(dst, m.Deliveries)
	dst = appendBool(dst, m.Maybe)
	return appendField(dst, m.Record)
}

// AppendAckRelay encodes m.
func AppendAckRelay(dst []byte, m *AckRelay) []byte {
	dst = binary.AppendUvarint(dst, m.Instance)
	dst = appendString(dst, m.Member)
	dst = binary.AppendUvarint(dst, m.CorePartition)
	dst = binary.AppendUvarint(dst, m.Offset)
	dst = binary.AppendUvarint(dst, m.Deliveries)
	dst = binary.AppendUvarint(dst, m.Kind)
	return binary.AppendUvarint(dst, m.Delay)
}

// AppendMembers encodes m.
func AppendMembers(dst []byte, m *Members) []byte {
	dst = appendGroup(dst, m.Group)
	dst = appendBool(dst, m.DeliverAll)
	dst = appendBool(dst, m.Declared)
	dst = binary.AppendUvarint(dst, uint64(len(m.Members)))
	for _, x := range m.Members {
		dst = appendString(dst, x.ID)
		dst = binary.AppendUvarint(dst, uint64(x.Credit))
	}
	return dst
}

// --- decoding ---

// reader extends fields with numbers; the first error sticks.
type reader struct{ fields }

func (r *reader) uvarint(max uint64, what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > max {
		r.err = fmt.Errorf("%w: %s", ErrTruncated, what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) boolean(what string) bool {
	return r.uvarint(1, what) == 1
}

func (r *reader) str(max int) string { return string(r.next(max)) }

func (r *reader) group() GroupName {
	return GroupName{Filter: r.str(maxGroupField), Queue: r.str(maxGroupField)}
}

func (r *reader) epoch() election.Epoch {
	n := r.uvarint(^uint64(0), "epoch")
	return election.Epoch{N: n, Leader: election.NodeID(r.str(election.MaxNameLen))}
}

// end reports the first error, or trailing bytes.
func (r *reader) end(what string) error {
	if r.err != nil {
		return fmt.Errorf("cluster: decode %s: %w", what, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("cluster: decode %s: %w: %d trailing bytes", what, ErrTruncated, len(r.b))
	}
	return nil
}

const maxInt = uint64(^uint(0) >> 1)

// DecodePositionReq decodes a POSITION body.
func DecodePositionReq(b []byte) (PositionReq, error) {
	r := reader{fields{b: b}}
	m := PositionReq{ID: r.uvarint(^uint64(0), "id"), Group: r.group(), Epoch: r.epoch()}
	m.DeliverAll = r.boolean("deliver")
	return m, r.end("position")
}

// DecodePositionResp decodes a POSITIONED body.
func DecodePositionResp(b []byte) (PositionResp, error) {
	r := reader{fields{b: b}}
	m := PositionResp{ID: r.uvarint(^uint64(0), "id"), Err: r.str(maxErrText)}
	n := r.uvarint(maxPartitions, "partition count")
	if r.err == nil && n > 0 {
		m.Next = make([]uint64, 0, min(n, uint64(len(r.b))))
		for i := uint64(0); i < n && r.err == nil; i++ {
			m.Next = append(m.Next, r.uvarint(^uint64(0), "next offset"))
		}
	}
	return m, r.end("positioned")
}

// DecodeFetchReq decodes a FETCH body.
func DecodeFetchReq(b []byte) (FetchReq, error) {
	r := reader{fields{b: b}}
	m := FetchReq{ID: r.uvarint(^uint64(0), "id"), Group: r.group(), Epoch: r.epoch()}
	m.Partition = int(r.uvarint(maxPartitions, "partition"))
	m.From = r.uvarint(^uint64(0), "from")
	m.MaxMsgs = int(r.uvarint(maxRecordsInMsg, "max messages"))
	m.MaxBytes = int(r.uvarint(MaxFrame, "max bytes"))
	m.WaitMillis = int(r.uvarint(10*60*1000, "wait"))
	return m, r.end("fetch")
}

// DecodeFetchResp decodes a FETCHED body; Records alias b.
func DecodeFetchResp(b []byte) (FetchResp, error) {
	r := reader{fields{b: b}}
	m := FetchResp{ID: r.uvarint(^uint64(0), "id"), Err: r.str(maxErrText), Next: r.uvarint(^uint64(0), "next")}
	m.Durable = r.uvarint(^uint64(0), "durable")
	n := r.uvarint(maxRecordsInMsg, "record count")
	if r.err == nil && n > 0 {
		m.Records = make([]RawRecord, 0, min(n, uint64(len(r.b)/2)))
		for i := uint64(0); i < n && r.err == nil; i++ {
			off := r.uvarint(^uint64(0), "offset")
			raw := r.next(MaxFrame)
			m.Records = append(m.Records, RawRecord{Offset: off, Raw: raw})
		}
	}
	return m, r.end("fetched")
}

// DecodeCommitReq decodes a COMMIT body.
func DecodeCommitReq(b []byte) (CommitReq, error) {
	r := reader{fields{b: b}}
	m := CommitReq{ID: r.uvarint(^uint64(0), "id"), Group: r.group(), Epoch: r.epoch()}
	m.Sync = r.boolean("sync")
	n := r.uvarint(maxPartitions, "offset count")
	if r.err == nil && n > 0 {
		m.Offsets = make([]PartitionOffset, 0, min(n, uint64(len(r.b)/2)))
		for i := uint64(0); i < n && r.err == nil; i++ {
			p := int(r.uvarint(maxPartitions, "partition"))
			m.Offsets = append(m.Offsets, PartitionOffset{Partition: p, Offset: r.uvarint(^uint64(0), "offset")})
		}
	}
	return m, r.end("commit")
}

// DecodeCommitResp decodes a COMMITTED body.
func DecodeCommitResp(b []byte) (CommitResp, error) {
	r := reader{fields{b: b}}
	m := CommitResp{ID: r.uvarint(^uint64(0), "id"), Err: r.str(maxErrText)}
	return m, r.end("committed")
}

// ResponseID reads the request ID at the front of a POSITIONED, FETCHED or
// COMMITTED body.
func ResponseID(b []byte) (uint64, bool) {
	id, n := binary.Uvarint(b)
	return id, n > 0
}

// DecodeForward decodes a FORWARD body; Record aliases b.
func DecodeForward(b []byte) (Forward, error) {
	r := reader{fields{b: b}}
	m := Forward{Group: r.group(), Member: r.str(maxMemberID), Reason: r.str(maxErrText)}
	m.Instance = r.uvarint(maxInt, "instance")
	m.CorePartition = r.uvarint(maxInt, "core partition")
	m.Node = r.str(maxMemberID)
	m.Partition = r.uvarint(maxPartitions, "partition")
	m.Offset = r.uvarint(^uint64(0), "offset")
	m.Deliveries = r.uvarint(maxInt, "deliveries")
	m.Maybe = r.boolean("maybe")
	m.Record = r.next(MaxFrame)
	return m, r.end("forward")
}

// DecodeAckRelay decodes an ACK body.
func DecodeAckRelay(b []byte) (AckRelay, error) {
	r := reader{fields{b: b}}
	m := AckRelay{Instance: r.uvarint(maxInt, "instance"), Member: r.str(maxMemberID)}
	m.CorePartition = r.uvarint(maxInt, "core partition")
	m.Offset = r.uvarint(^uint64(0), "offset")
	m.Deliveries = r.uvarint(maxInt, "deliveries")
	m.Kind = r.uvarint(255, "kind")
	m.Delay = r.uvarint(maxInt, "delay")
	return m, r.end("ack")
}

// DecodeMembers decodes a MEMBERS body.
func DecodeMembers(b []byte) (Members, error) {
	r := reader{fields{b: b}}
	m := Members{Group: r.group()}
	m.DeliverAll = r.boolean("deliver")
	m.Declared = r.boolean("declared")
	n := r.uvarint(maxMembersInMsg, "member count")
	if r.err == nil && n > 0 {
		m.Members = make([]MemberInfo, 0, min(n, uint64(len(r.b)/2)))
		for i := uint64(0); i < n && r.err == nil; i++ {
			id := r.str(maxMemberID)
			m.Members = append(m.Members, MemberInfo{ID: id, Credit: int(r.uvarint(maxInt, "credit"))})
		}
	}
	return m, r.end("members")
}

// AppendRemoved encodes a REMOVED message: the group deleted.
func AppendRemoved(dst []byte, g GroupName) []byte { return appendGroup(dst, g) }

// DecodeRemoved decodes a REMOVED message.
func DecodeRemoved(b []byte) (GroupName, error) {
	r := reader{fields{b: b}}
	g := r.group()
	return g, r.end("removed")
}
