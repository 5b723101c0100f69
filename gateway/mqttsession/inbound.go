package mqttsession

import (
	"errors"
	"fmt"
	"slices"
)

// Errors of Inbound. A runner closes the connection on both (5.0:
// DISCONNECT with the reason code named).
var (
	// ErrReceiveMaximum: more unacknowledged QoS 1 and 2 PUBLISHes than
	// the server's receive maximum (Receive Maximum exceeded, 0x93).
	ErrReceiveMaximum = errors.New("mqttsession: receive maximum exceeded")
	// ErrPacketIDInUse: a PUBLISH reuses the packet ID of one still being
	// stored or acknowledged with another QoS, or a PUBREL arrives for a
	// PUBLISH not acknowledged yet (Protocol Error, 0x82).
	ErrPacketIDInUse = errors.New("mqttsession: packet identifier in use")
)

// InAction is what a runner does for an inbound PUBLISH or PUBREL.
type InAction byte

const (
	// InWait: nothing now; the answer follows when the record is durable
	// (a resent QoS 1 or 2 PUBLISH whose first copy is being stored).
	InWait InAction = iota
	// InStore: append the message; call Stored once it is durable (QoS 0:
	// nothing to call, nothing to answer).
	InStore
	// InPuback: send PUBACK (Stored of a QoS 1 message).
	InPuback
	// InPubrec: send PUBREC (Stored of a QoS 2 message, or a resent QoS 2
	// PUBLISH already stored: answered again without storing it twice).
	InPubrec
	// InPubcomp: send PUBCOMP for a PUBREL; the packet ID is free again.
	InPubcomp
	// InPubcompNotFound: send PUBCOMP with Packet Identifier not found
	// (0x92) for a PUBREL of an ID the session does not know (in 3.1.1 a
	// plain PUBCOMP).
	InPubcompNotFound
)

var inActionNames = [...]string{"wait", "store", "puback", "pubrec", "pubcomp", "pubcomp-not-found"}

func (a InAction) String() string {
	if int(a) < len(inActionNames) {
		return inActionNames[a]
	}
	return fmt.Sprintf("InAction(%d)", byte(a))
}

type inState byte

const (
	storingQoS1 inState = iota + 1
	storingQoS2
	recordedQoS2 // PUBREC sent, waiting for PUBREL
)

// Inbound tracks a client's QoS 1 and 2 PUBLISHes that the server has not
// finished acknowledging. Every tracked ID counts against the receive
// maximum the server advertised: a QoS 1 one until its PUBACK, a QoS 2 one
// until its PUBCOMP. The QoS 2 IDs past PUBREC (Recorded) are what a
// persistent session keeps across a reconnect and a node restart.
type Inbound struct {
	max int
	ids map[uint16]inState
}

// NewInbound tracks at most receiveMax messages (1 to 65,535; the server's
// Receive Maximum, 65,535 in 3.1.1 where none is advertised).
func NewInbound(receiveMax uint16) *Inbound {
	return &Inbound{max: max(int(receiveMax), 1), ids: make(map[uint16]inState)}
}

// Publish handles a PUBLISH with packet ID id (ignored at QoS 0).
func (in *Inbound) Publish(qos byte, id uint16) (InAction, error) {
	if qos == 0 {
		return InStore, nil
	}
	st, known := in.ids[id]
	switch {
	case !known:
		if len(in.ids) >= in.max {
			return InWait, fmt.Errorf("%w: %d in flight", ErrReceiveMaximum, len(in.ids))
		}
		if qos == 1 {
			in.ids[id] = storingQoS1
		} else {
			in.ids[id] = storingQoS2
		}
		return InStore, nil
	case qos == 1 && st == storingQoS1, qos == 2 && st == storingQoS2:
		return InWait, nil // a resend while the first copy is being stored
	case qos == 2 && st == recordedQoS2:
		return InPubrec, nil
	}
	return InWait, fmt.Errorf("%w: QoS %d PUBLISH with ID %d", ErrPacketIDInUse, qos, id)
}

// Stored reports that the PUBLISH with id is durable, and returns the
// answer to send (InWait for an ID not being stored: nothing to send).
// The runner calls Stored or Refused for every InStore, also after the
// connection closed: a persistent session keeps its Inbound, so a QoS 2
// PUBLISH resent on the next connection while the first copy is still
// being stored waits for it (InWait) instead of being stored twice.
func (in *Inbound) Stored(id uint16) InAction {
	switch in.ids[id] {
	case storingQoS1:
		delete(in.ids, id)
		return InPuback
	case storingQoS2:
		in.ids[id] = recordedQoS2
		return InPubrec
	}
	return InWait
}

// Refused drops the PUBLISH with id whose store failed: the runner answers
// it with a failure reason (5.0) or closes the connection (3.1.1), and the
// ID is free again.
func (in *Inbound) Refused(id uint16) {
	if st := in.ids[id]; st == storingQoS1 || st == storingQoS2 {
		delete(in.ids, id)
	}
}

// Pubrel handles a PUBREL for id.
func (in *Inbound) Pubrel(id uint16) (InAction, error) {
	switch in.ids[id] {
	case recordedQoS2:
		delete(in.ids, id)
		return InPubcomp, nil
	case 0:
		// Already completed (a resent PUBREL after a lost PUBCOMP) or
		// never seen.
		return InPubcompNotFound, nil
	}
	return InWait, fmt.Errorf("%w: PUBREL for ID %d before its PUBREC", ErrPacketIDInUse, id)
}

// InFlight returns how many IDs count against the receive maximum.
func (in *Inbound) InFlight() int { return len(in.ids) }

// Recorded returns the QoS 2 IDs past PUBREC, sorted: what a persistent
// session saves so a PUBLISH resent after a restart is not stored twice.
// For exactly once across a crash, the runner makes an ID durable with
// its record (in the same log record, say): an ID saved after the record
// leaves a window in which a crash forgets it and the resend is stored
// again.
func (in *Inbound) Recorded() []uint16 {
	var out []uint16
	for id, st := range in.ids {
		if st == recordedQoS2 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Restore marks ids as QoS 2 IDs past PUBREC (from Recorded of a saved
// session). IDs beyond the receive maximum are kept too: they were
// accepted under the limit of their time.
func (in *Inbound) Restore(ids []uint16) {
	for _, id := range ids {
		in.ids[id] = recordedQoS2
	}
}
