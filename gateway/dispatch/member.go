// Package dispatch runs queue groups: it connects each group's dispatch core
// (gateway/queue) to the telemetry log (wal) and to members, and runs the
// live tail of plain subscriptions. Protocols stay outside: a member is an
// interface, implemented by a NATS connection's subscription (and, later, by a
// member on a peer node).
package dispatch

import (
	"strconv"

	"edgeq/gateway/natsproto"
	"edgeq/wal"
)

// Member receives deliveries. Deliver must not block: it copies what it needs
// (the Delivery is only valid during the call) into its outbound buffer, or
// returns false when it cannot take the message (its connection is closed or
// over its pending limit); the group then gives the message to another member.
type Member interface {
	Deliver(d *Delivery) bool
}

// Delivery is one message for a member, as the NATS protocol carries it. All
// its fields alias buffers that are reused after Deliver returns: a member
// that keeps anything copies it (strings.Clone, bytes.Clone).
type Delivery struct {
	Subject string // <prefix>.<device>
	Reply   string // ack subject; empty for live-tail deliveries
	Header  []byte // complete NATS header block
	Payload []byte
}

// Header names carried with every delivery (ARCHITECTURE.md section 2).
const (
	HeaderDevice     = "Edgeq-Device"
	HeaderSeq        = "Edgeq-Seq"
	HeaderTime       = "Edgeq-Time"
	HeaderNode       = "Edgeq-Node"
	HeaderPartition  = "Edgeq-Partition"
	HeaderOffset     = "Edgeq-Offset"
	HeaderDeliveries = "Edgeq-Deliveries"
	HeaderSource     = "Edgeq-Source"
	HeaderReason     = "Edgeq-Dead-Reason"
	HeaderGroup      = "Edgeq-Group"
)

// deliveryBuilder builds deliveries into reused buffers: no allocation per
// message once warmed up.
type deliveryBuilder struct {
	node    string
	prefix  string
	subject []byte
	reply   []byte
	header  []byte
	d       Delivery
}

// build fills b.d for rec at (partition, offset) of node's log (b.node when
// empty). b.reply may be empty. deliveries 0 leaves out Edgeq-Deliveries
// (live tail).
func (b *deliveryBuilder) build(rec *wal.Record, node string, partition int, offset uint64, deliveries int, extra []wal.Header) *Delivery {
	if node == "" {
		node = b.node
	}
	b.subject = append(append(append(b.subject[:0], b.prefix...), '.'), rec.Device...)
	h := b.header[:0]
	h, _ = natsproto.AppendHeaderStart(h, 0, "")
	h = appendField(h, HeaderDevice, rec.Device)
	h, _ = natsproto.AppendHeaderInt(h, HeaderSeq, int64(rec.Seq))
	h, _ = natsproto.AppendHeaderInt(h, HeaderTime, rec.Time)
	h = appendField(h, HeaderNode, node)
	h, _ = natsproto.AppendHeaderInt(h, HeaderPartition, int64(partition))
	h, _ = natsproto.AppendHeaderInt(h, HeaderOffset, int64(offset))
	if deliveries > 0 {
		h, _ = natsproto.AppendHeaderInt(h, HeaderDeliveries, int64(deliveries))
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
	b.header = natsproto.AppendHeaderEnd(h)
	b.d = Delivery{Subject: unsafeString(b.subject), Reply: unsafeString(b.reply), Header: b.header, Payload: rec.Payload}
	return &b.d
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

// ackSubject writes the reply subject of a delivery:
// $EQ.ACK.<group id>.<member>.<partition>.<offset>.<deliveries>
func appendAckSubject(dst []byte, gid int, member string, partition int, offset uint64, deliveries int) []byte {
	dst = append(dst, AckPrefix...)
	dst = strconv.AppendInt(dst, int64(gid), 10)
	dst = append(dst, '.')
	dst = append(dst, member...)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(partition), 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, offset, 10)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, int64(deliveries), 10)
}
