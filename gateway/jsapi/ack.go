package jsapi

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"edgeq/gateway/natsproto"
)

// AckPrefix starts JetStream ack subjects.
const AckPrefix = "$JS.ACK."

// AckMeta is what a JetStream ack subject carries:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// (the 9-token form nats.go's Metadata() and jsm.go parse).
type AckMeta struct {
	Stream, Consumer string
	Delivered        int
	StreamSeq        uint64
	ConsumerSeq      uint64 // edgeq: the member's delivery number (the key of its ack table)
	Time             int64  // unix ns
	Pending          uint64
}

// ErrBadAckSubject: a $JS.ACK subject edgeq did not issue.
var ErrBadAckSubject = errors.New("jsapi: bad JetStream ack subject")

// AppendAckSubject writes m as an ack subject. Stream and consumer names
// are checked tokens (ValidName), so no escaping is needed.
func AppendAckSubject(dst []byte, m *AckMeta) []byte {
	return appendAckFields(append(dst, AckPrefix...), m)
}

// appendAckFields writes the seven fields of an ack subject.
func appendAckFields(dst []byte, m *AckMeta) []byte {
	dst = append(dst, m.Stream...)
	dst = append(dst, '.')
	dst = append(dst, m.Consumer...)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(m.Delivered), 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, m.StreamSeq, 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, m.ConsumerSeq, 10)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, m.Time, 10)
	dst = append(dst, '.')
	return strconv.AppendUint(dst, m.Pending, 10)
}

// ParseAckSubject reads what AppendAckSubject wrote. Stream and Consumer
// are left empty; their tokens are returned as slices of subject.
func ParseAckSubject(subject []byte) (m AckMeta, stream, consumer []byte, err error) {
	rest, ok := bytes.CutPrefix(subject, []byte(AckPrefix))
	if !ok {
		return m, nil, nil, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	var f [7][]byte
	for i := range 6 {
		j := bytes.IndexByte(rest, '.')
		if j < 0 {
			return m, nil, nil, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	f[6] = rest
	if bytes.IndexByte(rest, '.') >= 0 || len(f[0]) == 0 || len(f[1]) == 0 {
		return m, nil, nil, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	var n [5]uint64
	for i := range 5 {
		v, ok := atou(f[2+i])
		if !ok {
			return m, nil, nil, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
		}
		n[i] = v
	}
	if n[0] < 1 || n[0] > 1<<31 || n[2] == 0 {
		return m, nil, nil, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	m = AckMeta{Delivered: int(n[0]), StreamSeq: n[1], ConsumerSeq: n[2], Time: int64(n[3]), Pending: n[4]}
	return m, f[0], f[1], nil
}

var atou = natsproto.ParseUint

// ValidName reports whether s can name a stream or consumer: a single
// subject token of printable ASCII without wildcards, at most 64 bytes.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' {
			return false
		}
	}
	return true
}

// QueueAck is what the ack subject of a core queue-group delivery carries
// in JetStream's 14-token form (jetstream.queue_ack_subjects), which
// nats.go's Metadata() and natscli `sub --ack` parse as the v2 ack subject
// (domain "_", account hash "edgeq"):
// $JS.ACK._.edgeq.<stream>.<queue>.<delivered>.<sseq>.<offset>.<ts>.0.<group>.<member>.<core partition>
type QueueAck struct {
	Meta      AckMeta // Consumer is the queue (or "_" if it is no valid name)
	Group     int
	Member    []byte
	Partition int // the partition ID in the group's core
}

const queueAckPrefix = AckPrefix + "_.edgeq."

// IsQueueAck reports whether subject is a queue-group ack subject.
func IsQueueAck(subject []byte) bool { return bytes.HasPrefix(subject, []byte(queueAckPrefix)) }

// AppendQueueAckSubject writes q's subject.
func AppendQueueAckSubject(dst []byte, q *QueueAck) []byte {
	dst = append(dst, queueAckPrefix...)
	m := q.Meta
	if !ValidName(m.Consumer) {
		m.Consumer = "_"
	}
	m.Pending = 0
	dst = appendAckFields(dst, &m)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(q.Group), 10)
	dst = append(dst, '.')
	dst = append(dst, q.Member...)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, int64(q.Partition), 10)
}

// ParseQueueAckSubject reads what AppendQueueAckSubject wrote; Member
// aliases subject.
func ParseQueueAckSubject(subject []byte) (QueueAck, error) {
	var q QueueAck
	rest, ok := bytes.CutPrefix(subject, []byte(queueAckPrefix))
	if !ok {
		return q, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	var f [10][]byte
	for i := range 9 {
		j := bytes.IndexByte(rest, '.')
		if j < 0 {
			return q, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	f[9] = rest
	if bytes.IndexByte(rest, '.') >= 0 || len(f[8]) == 0 {
		return q, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	var n [8]uint64
	for i, k := range [8]int{2, 3, 4, 5, 6, 7, 9, 9} {
		v, ok := atou(f[k])
		if !ok {
			return q, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
		}
		n[i] = v
	}
	if n[0] < 1 || n[0] > 1<<31 || n[2] == 0 || n[5] > 1<<62 || n[6] > 1<<31 {
		return q, fmt.Errorf("%w: %q", ErrBadAckSubject, subject)
	}
	q.Meta = AckMeta{Delivered: int(n[0]), StreamSeq: n[1], ConsumerSeq: n[2], Time: int64(n[3]), Pending: n[4]}
	q.Group, q.Member, q.Partition = int(n[5]), f[8], int(n[6])
	return q, nil
}
