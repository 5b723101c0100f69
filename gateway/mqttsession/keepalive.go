package mqttsession

import "time"

// KeepAlive tracks the deadline by which a client must send a packet: one
// and a half times its keep alive after the last packet (MQTT 3.1.2.10 and
// 3.1.2.11). A keep alive of 0 disables the deadline.
type KeepAlive struct {
	period   time.Duration // 1.5 times the keep alive; 0 when disabled
	deadline time.Time
}

// EffectiveKeepAlive returns the keep alive a server uses for a client
// asking for asked seconds, with serverMax (0: no limit) the most it
// allows: the client's value when within bounds, else serverMax, which a
// 5.0 server then sends as Server Keep Alive (override true). A client
// asking for 0 (none) is given serverMax too when the server has a limit.
func EffectiveKeepAlive(asked, serverMax uint16) (keepAlive uint16, override bool) {
	if serverMax == 0 || (asked != 0 && asked <= serverMax) {
		return asked, false
	}
	return serverMax, true
}

// NewKeepAlive starts the deadline for a connection accepted at now with
// a keep alive of seconds.
func NewKeepAlive(seconds uint16, now time.Time) KeepAlive {
	k := KeepAlive{period: time.Duration(seconds) * 1500 * time.Millisecond}
	k.Seen(now)
	return k
}

// Seen records a packet received at now.
func (k *KeepAlive) Seen(now time.Time) {
	if k.period > 0 {
		k.deadline = now.Add(k.period)
	}
}

// Deadline returns when the connection expires, and false when it never does.
func (k *KeepAlive) Deadline() (time.Time, bool) { return k.deadline, k.period > 0 }

// Expired reports whether nothing arrived before the deadline: the server
// then closes the connection (5.0: DISCONNECT with Keep Alive timeout,
// 0x8D) and the will is published.
func (k *KeepAlive) Expired(now time.Time) bool {
	return k.period > 0 && now.After(k.deadline)
}
