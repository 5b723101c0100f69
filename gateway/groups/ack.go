package groups

import (
	"errors"
	"time"
)

// AckKind is what a worker said about a delivery.
type AckKind uint8

const (
	AckDone       AckKind = iota + 1 // done
	AckNak                           // redeliver (after an optional delay)
	AckInProgress                    // still working: reset the deadline
	AckTerm                          // never deliver again (dead letter)
	// ackGone is relayed to a leader in place of an acknowledgement when a
	// forwarded delivery found its member gone or unable to take it: the
	// leader removes the member, as it does with a local member that
	// refuses, and its messages go to others. Workers cannot send it.
	ackGone AckKind = 100
)

func (k AckKind) String() string {
	if k == ackGone {
		return "gone"
	}
	return [...]string{"?", "ack", "nak", "in_progress", "term"}[min(int(k), 4)]
}

// Ack is a worker's answer about one delivery.
type Ack struct {
	Handle AckHandle
	Kind   AckKind
	Delay  time.Duration // nak only
}

// ErrBadAck is returned for an acknowledgement edgeq did not issue.
var ErrBadAck = errors.New("groups: bad acknowledgement")
