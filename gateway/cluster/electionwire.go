package cluster

import (
	"encoding/binary"
	"fmt"

	"edgeq/discovery/election"
)

// Election messages on the wire (frame type TypeElection): uvarint type,
// group, from, to, epoch number, epoch leader, rank priority (varint), rank
// hash (8 bytes), rank node.

// AppendElection encodes msg.
func AppendElection(dst []byte, msg election.Message) []byte {
	dst = binary.AppendUvarint(dst, uint64(msg.Type))
	dst = appendField(dst, []byte(msg.Group))
	dst = appendField(dst, []byte(msg.From))
	dst = appendField(dst, []byte(msg.To))
	dst = binary.AppendUvarint(dst, msg.Epoch.N)
	dst = appendField(dst, []byte(msg.Epoch.Leader))
	dst = binary.AppendVarint(dst, int64(msg.Rank.Priority))
	dst = binary.BigEndian.AppendUint64(dst, msg.Rank.Hash)
	return appendField(dst, []byte(msg.Rank.Node))
}

// DecodeElection decodes an election message; the machine's Step validates
// its contents.
func DecodeElection(b []byte) (election.Message, error) {
	var msg election.Message
	t, n := binary.Uvarint(b)
	if n <= 0 || t == 0 || t > 255 {
		return msg, fmt.Errorf("%w: election message type", ErrTruncated)
	}
	f := fields{b: b[n:]}
	msg.Type = election.MsgType(t)
	msg.Group = string(f.next(election.MaxNameLen))
	msg.From = election.NodeID(f.next(election.MaxNameLen))
	msg.To = election.NodeID(f.next(election.MaxNameLen))
	if f.err != nil {
		return msg, f.err
	}
	msg.Epoch.N, n = binary.Uvarint(f.b)
	if n <= 0 {
		return msg, fmt.Errorf("%w: epoch", ErrTruncated)
	}
	f.b = f.b[n:]
	msg.Epoch.Leader = election.NodeID(f.next(election.MaxNameLen))
	if f.err != nil {
		return msg, f.err
	}
	prio, n := binary.Varint(f.b)
	if n <= 0 || len(f.b) < n+8 {
		return msg, fmt.Errorf("%w: rank", ErrTruncated)
	}
	msg.Rank.Priority = int(prio)
	msg.Rank.Hash = binary.BigEndian.Uint64(f.b[n:])
	f.b = f.b[n+8:]
	msg.Rank.Node = election.NodeID(f.next(election.MaxNameLen))
	if f.err != nil {
		return msg, f.err
	}
	if len(f.b) != 0 {
		return msg, fmt.Errorf("%w: %d trailing bytes", ErrTruncated, len(f.b))
	}
	return msg, nil
}
