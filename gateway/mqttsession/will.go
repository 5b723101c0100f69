package mqttsession

import "time"

// CloseKind is how a connection ended, for the will.
type CloseKind byte

const (
	// CloseNormal: the client sent DISCONNECT with reason 0x00 (3.1.1: any
	// DISCONNECT). The will is discarded.
	CloseNormal CloseKind = iota + 1
	// CloseWithWill: the client sent DISCONNECT with Disconnect with Will
	// Message (0x04, 5.0).
	CloseWithWill
	// CloseAbnormal: the network closed or failed, the keep alive expired,
	// the server closed the connection for a protocol error, or a new
	// connection took the session over.
	CloseAbnormal
)

// Will decides when a connection's will message is published: never after
// a normal DISCONNECT; otherwise after the will delay (5.0; 0 in 3.1.1), or
// when the session ends if that is sooner, unless a connection resumes the
// session first (MQTT 5.0 section 3.1.3.2.2).
type Will struct {
	present bool
	delay   time.Duration
	due     time.Time
	pending bool // closed abnormally, not yet published or cancelled
}

// NewWill starts the rules for a CONNECT: present when it carries a will,
// delay its Will Delay Interval.
func NewWill(present bool, delay time.Duration) Will {
	return Will{present: present, delay: delay}
}

// Closed records how the connection ended at now. sessionExpiry is how long
// the session outlives the connection (0: it ends with it). It returns
// whether the will is now scheduled.
func (w *Will) Closed(kind CloseKind, now time.Time, sessionExpiry time.Duration) bool {
	if !w.present || w.pending {
		return w.pending
	}
	w.present = false
	if kind == CloseNormal {
		return false
	}
	w.pending = true
	w.due = now.Add(min(w.delay, sessionExpiry))
	return true
}

// Resumed cancels a scheduled will that is not due yet: a new connection
// took up the session at now (5.0: the will delay exists for this).
// It returns whether a will was cancelled.
func (w *Will) Resumed(now time.Time) bool {
	if !w.pending || !now.Before(w.due) {
		return false
	}
	w.pending = false
	return true
}

// Due reports whether the will must be published at now; it reports true
// once, and the runner publishes it.
func (w *Will) Due(now time.Time) bool {
	if !w.pending || now.Before(w.due) {
		return false
	}
	w.pending = false
	return true
}

// Deadline returns when a scheduled will is due, for the runner's timer.
func (w *Will) Deadline() (time.Time, bool) { return w.due, w.pending }
