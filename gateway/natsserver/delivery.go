package natsserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"edgeq/gateway/groups"
	"edgeq/gateway/natsproto"
	"edgeq/wal"
)

// How edgeq's deliveries look on the NATS protocol (ARCHITECTURE.md section
// 2): HMSG on <prefix>.<device> with Edgeq-* headers and, for queue-group
// members, a reply subject under $EQ.ACK. that names the delivery.
const (
	AckPrefix = "$EQ.ACK."
	RdyPrefix = "$EQ.RDY."
	DLQPrefix = "$EQ.DLQ."
)

// Header names carried with every delivery and dead letter.
const (
	HeaderDevice     = "Edgeq-Device"
	HeaderSeq        = "Edgeq-Seq"
	HeaderTime       = "Edgeq-Time"
	HeaderNode       = "Edgeq-Node"
	HeaderPartition  = "Edgeq-Partition"
	HeaderOffset     = "Edgeq-Offset"
	HeaderDeliveries = "Edgeq-Deliveries"
	HeaderSource     = "Edgeq-Source"
	HeaderMaybe      = "Edgeq-Redelivered" // "maybe" on a first delivery that may have been delivered before a failover
	HeaderReason     = "Edgeq-Dead-Reason"
	HeaderGroup      = "Edgeq-Group"
)

// appendDeliveryHeader writes the header block of d. Extra fields (dead
// letters) come after edgeq's and before the record's own headers.
func appendDeliveryHeader(h []byte, d *groups.Delivery, extra ...wal.Header) []byte {
	rec := d.Record
	h, _ = natsproto.AppendHeaderStart(h, 0, "")
	h = appendField(h, HeaderDevice, rec.Device)
	h, _ = natsproto.AppendHeaderInt(h, HeaderSeq, int64(rec.Seq))
	h, _ = natsproto.AppendHeaderInt(h, HeaderTime, rec.Time)
	h = appendField(h, HeaderNode, d.Node)
	h, _ = natsproto.AppendHeaderInt(h, HeaderPartition, int64(d.Partition))
	h, _ = natsproto.AppendHeaderInt(h, HeaderOffset, int64(d.Offset))
	if d.Deliveries > 0 {
		h, _ = natsproto.AppendHeaderInt(h, HeaderDeliveries, int64(d.Deliveries))
	}
	if d.MaybeDelivered {
		h = appendField(h, HeaderMaybe, "maybe")
	}
	if rec.Source != "" {
		h = appendField(h, HeaderSource, rec.Source)
	}
	for _, x := range extra {
		h = appendField(h, x.Key, x.Value)
	}
	for _, x := range rec.Headers {
		h = appendField(h, x.Key, x.Value)
	}
	return natsproto.AppendHeaderEnd(h)
}

// appendField skips a header the framing cannot carry (validated at ingest,
// so this only guards against records written by another version).
func appendField(h []byte, k, v string) []byte {
	out, err := natsproto.AppendHeaderField(h, k, v)
	if err != nil {
		return h
	}
	return out
}

// appendAckSubject writes the reply subject of a delivery:
// $EQ.ACK.<group instance>.<member>.<partition>.<offset>.<deliveries>
func appendAckSubject(dst []byte, h groups.AckHandle) []byte {
	dst = append(dst, AckPrefix...)
	dst = strconv.AppendInt(dst, int64(h.Group), 10)
	dst = append(dst, '.')
	dst = append(dst, h.Member...)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(h.Partition), 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, h.Offset, 10)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, int64(h.Deliveries), 10)
}

// errBadAck: an ack subject or payload edgeq did not issue.
var errBadAck = groups.ErrBadAck

// parseAckSubject reads what appendAckSubject wrote. The member ID is
// returned as a slice of subject: no allocation.
func parseAckSubject(subject []byte) (groups.AckHandle, []byte, error) {
	var h groups.AckHandle
	rest, ok := bytes.CutPrefix(subject, []byte(AckPrefix))
	if !ok {
		return h, nil, fmt.Errorf("%w: subject %q", errBadAck, subject)
	}
	var f [5][]byte
	for i := range 4 {
		j := bytes.IndexByte(rest, '.')
		if j < 0 {
			return h, nil, fmt.Errorf("%w: subject %q", errBadAck, subject)
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	f[4] = rest
	if bytes.IndexByte(f[4], '.') >= 0 || len(f[1]) == 0 {
		return h, nil, fmt.Errorf("%w: subject %q", errBadAck, subject)
	}
	gid, ok1 := atoi(f[0])
	part, ok2 := atoi(f[2])
	off, ok3 := atou(f[3])
	deliveries, ok4 := atoi(f[4])
	if !ok1 || !ok2 || !ok3 || !ok4 || off == 0 || deliveries < 1 {
		return h, nil, fmt.Errorf("%w: subject %q", errBadAck, subject)
	}
	h = groups.AckHandle{Group: gid, Partition: part, Offset: off, Deliveries: deliveries}
	return h, f[1], nil
}

var atou = natsproto.ParseUint

func atoi(b []byte) (int, bool) {
	n, ok := atou(b)
	if !ok || len(b) > 18 {
		return 0, false
	}
	return int(n), true
}

// ParseAckPayload reads the JetStream ack tokens: empty or +ACK ack, -NAK nak
// with an optional delay (`-NAK {"delay": 5000000000}` as nats.go's
// NakWithDelay sends, or a duration string `-NAK 5s`), +WPI in progress, +TERM
// term (an optional reason after it is ignored). +NXT acks.
func ParseAckPayload(p []byte) (groups.AckKind, time.Duration, error) {
	p = bytes.TrimSpace(p)
	switch {
	case len(p) == 0, bytes.Equal(p, []byte("+ACK")), bytes.HasPrefix(p, []byte("+NXT")):
		return groups.AckDone, 0, nil
	case bytes.Equal(p, []byte("+WPI")):
		return groups.AckInProgress, 0, nil
	case bytes.HasPrefix(p, []byte("+TERM")):
		return groups.AckTerm, 0, nil
	case bytes.HasPrefix(p, []byte("-NAK")):
		arg := bytes.TrimSpace(p[4:])
		if len(arg) == 0 {
			return groups.AckNak, 0, nil
		}
		if arg[0] == '{' {
			var v struct {
				Delay int64 `json:"delay"`
			}
			if err := json.Unmarshal(arg, &v); err != nil || v.Delay < 0 {
				return 0, 0, fmt.Errorf("%w: nak delay %q", errBadAck, arg)
			}
			return groups.AckNak, time.Duration(v.Delay), nil
		}
		d, err := time.ParseDuration(string(arg))
		if err != nil || d < 0 {
			return 0, 0, fmt.Errorf("%w: nak delay %q", errBadAck, arg)
		}
		return groups.AckNak, d, nil
	}
	return 0, 0, fmt.Errorf("%w: payload %q", errBadAck, p)
}

// errNotYourAck: an acknowledgement from a connection that does not hold
// the message.
var errNotYourAck = errors.New("natsserver: acknowledgement for a member of another connection")

// handleAck takes a PUB on an ack subject. Only the connection whose
// subscription received the message may answer for it: another
// connection's ack, nak or term is refused and counted, the message stays
// with its member.
func (c *conn) handleAck(subject, payload []byte) error {
	h, member, err := parseAckSubject(subject)
	if err != nil {
		return err
	}
	return c.ackMember(h, member, payload)
}

// ackMember applies payload to delivery h of this connection's member.
func (c *conn) ackMember(h groups.AckHandle, member, payload []byte) error {
	kind, delay, err := ParseAckPayload(payload)
	if err != nil {
		return err
	}
	c.s.subsMu.Lock()
	sb := c.members[string(member)] // no allocation: map index by converted bytes
	c.s.subsMu.Unlock()
	if sb == nil {
		c.s.stats.ForeignAcks.Add(1)
		return errNotYourAck
	}
	h.Member = sb.groupMember
	err = c.s.queues.Ack(groups.Ack{Handle: h, Kind: kind, Delay: delay})
	if kind != groups.AckInProgress && sb.answered.Add(1) >= sb.sent.Load() {
		c.s.subsMu.Lock()
		retired := sb.retired
		c.s.subsMu.Unlock()
		if retired {
			c.s.endRetired(sb) // it answered for all it held: leave now
		}
	}
	return err
}

// Deliver makes a subscription a groups.Member (queue groups, live tail):
// the delivery is encoded straight into the connection's output buffer.
func (sb *sub) Deliver(d *groups.Delivery) bool {
	return sb.c.sendDelivery(sb, d)
}

var _ groups.Member = (*sub)(nil)

// PublishDeadLetter publishes a dead letter of queue on $EQ.DLQ.<queue> to
// this node's subscribers, with the delivery's headers, the reason and the
// group.
func (s *Server) PublishDeadLetter(queueName string, d *groups.Delivery, reason string) {
	h := appendDeliveryHeader(nil, d, wal.Header{Key: HeaderReason, Value: reason}, wal.Header{Key: HeaderGroup, Value: queueName})
	s.publishCore(nil, DLQPrefix+queueName, "", h, d.Record.Payload)
}

// unsafeString views b as a string for the duration of an append; the
// scratch buffers are not written meanwhile (both under conn.mu).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
