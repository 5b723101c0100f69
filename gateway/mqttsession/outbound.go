package mqttsession

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Errors of Outbound.
var (
	// ErrWindowFull: Send with as many messages in flight as the client's
	// receive maximum; the runner waits for an acknowledgement.
	ErrWindowFull = errors.New("mqttsession: in-flight window full")
	// ErrBadQoS: Send of a QoS other than 1 or 2 (QoS 0 is not tracked).
	ErrBadQoS = errors.New("mqttsession: only QoS 1 and 2 deliveries are tracked")
)

// OutState is where a delivery in flight stands.
type OutState byte

const (
	// AwaitingAck: PUBLISH sent, waiting for PUBACK (QoS 1) or PUBREC (QoS 2).
	AwaitingAck OutState = iota + 1
	// AwaitingComp: PUBREL sent, waiting for PUBCOMP (QoS 2).
	AwaitingComp
)

// Resend is one packet to send again when a session resumes, in the
// order the deliveries were first sent.
type Resend[H any] struct {
	ID     uint16
	QoS    byte
	Pubrel bool // send PUBREL; else the PUBLISH again with DUP set
	Handle H
}

type outEntry[H any] struct {
	seq    uint64 // send order
	qos    byte
	state  OutState
	handle H
}

// Outbound tracks QoS 1 and 2 deliveries to one client: at most the
// client's receive maximum in flight, each under a packet ID unique among
// them. H is the runner's handle for a delivery (for edgeq, what acks it
// upstream once the client acknowledged it).
type Outbound[H any] struct {
	window  int
	nextID  uint16
	seq     uint64
	flights map[uint16]*outEntry[H]
}

// NewOutbound allows receiveMax deliveries in flight (the client's
// Receive Maximum, 65,535 when it sent none).
func NewOutbound[H any](receiveMax uint16) *Outbound[H] {
	return &Outbound[H]{window: max(int(receiveMax), 1), nextID: 1, flights: make(map[uint16]*outEntry[H])}
}

// SetWindow changes the receive maximum (a resumed session's new CONNECT).
// Deliveries beyond a smaller window stay in flight; Send waits until
// enough of them are acknowledged.
func (o *Outbound[H]) SetWindow(receiveMax uint16) { o.window = max(int(receiveMax), 1) }

// CanSend reports whether the window has room.
func (o *Outbound[H]) CanSend() bool { return len(o.flights) < o.window }

// InFlight returns how many deliveries are in flight.
func (o *Outbound[H]) InFlight() int { return len(o.flights) }

// Send allocates a packet ID for a delivery of qos: the lowest free one
// from where the last allocation stopped, wrapping from 65,535 to 1.
func (o *Outbound[H]) Send(qos byte, h H) (uint16, error) {
	if qos != 1 && qos != 2 {
		return 0, fmt.Errorf("%w: QoS %d", ErrBadQoS, qos)
	}
	if !o.CanSend() {
		return 0, fmt.Errorf("%w: %d in flight", ErrWindowFull, len(o.flights))
	}
	// The window is at most 65,535 wide, so a free ID exists.
	id := o.nextID
	for o.flights[id] != nil {
		id = nextPacketID(id)
	}
	o.nextID = nextPacketID(id)
	o.seq++
	o.flights[id] = &outEntry[H]{seq: o.seq, qos: qos, state: AwaitingAck, handle: h}
	return id, nil
}

func nextPacketID(id uint16) uint16 {
	if id == 65535 {
		return 1
	}
	return id + 1
}

// Puback handles a PUBACK: the QoS 1 delivery is done, and its handle is
// returned. ok is false for an ID not awaiting a PUBACK (ignored).
func (o *Outbound[H]) Puback(id uint16) (h H, ok bool) {
	e := o.flights[id]
	if e == nil || e.qos != 1 {
		return h, false
	}
	delete(o.flights, id)
	return e.handle, true
}

// Pubrec handles a PUBREC with a 5.0 reason code (0 in 3.1.1). A success
// moves the delivery to AwaitingComp and the runner sends PUBREL (sendPubrel
// true). A failure code (0x80 and above) ends the delivery with no PUBREL:
// done is true and h is the handle, for the runner to treat as refused.
// An unknown ID is answered with a PUBREL too (5.0: with Packet
// Identifier not found), known false.
func (o *Outbound[H]) Pubrec(id uint16, reason byte) (h H, sendPubrel, done, known bool) {
	e := o.flights[id]
	if e == nil || e.qos != 2 {
		return h, true, false, false
	}
	if reason >= 0x80 {
		delete(o.flights, id)
		return e.handle, false, true, true
	}
	e.state = AwaitingComp
	return e.handle, true, false, true
}

// Pubcomp handles a PUBCOMP: the QoS 2 delivery is done.
func (o *Outbound[H]) Pubcomp(id uint16) (h H, ok bool) {
	e := o.flights[id]
	if e == nil || e.qos != 2 || e.state != AwaitingComp {
		return h, false
	}
	delete(o.flights, id)
	return e.handle, true
}

// Resends returns what to send when a persistent session resumes: every
// delivery in flight in the order first sent, a PUBLISH with DUP for those
// awaiting PUBACK or PUBREC and a PUBREL for those awaiting PUBCOMP (MQTT
// 4.4). The deliveries stay in flight.
func (o *Outbound[H]) Resends() []Resend[H] {
	entries := make([]uint16, 0, len(o.flights))
	for id := range o.flights {
		entries = append(entries, id)
	}
	slices.SortFunc(entries, func(a, b uint16) int {
		return cmp.Compare(o.flights[a].seq, o.flights[b].seq)
	})
	out := make([]Resend[H], len(entries))
	for i, id := range entries {
		e := o.flights[id]
		out[i] = Resend[H]{ID: id, QoS: e.qos, Pubrel: e.state == AwaitingComp, Handle: e.handle}
	}
	return out
}

// Drop ends every delivery in flight and returns their handles in send
// order: a session that ends (clean start, expiry) gives them back for
// redelivery elsewhere.
func (o *Outbound[H]) Drop() []H {
	rs := o.Resends()
	out := make([]H, len(rs))
	for i, r := range rs {
		out[i] = r.Handle
	}
	clear(o.flights)
	return out
}
