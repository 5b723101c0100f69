package mqttproto

import "fmt"

// Limits bound what one Parser accepts and keeps in memory.
type Limits struct {
	// MaxPacketSize is the largest packet accepted, in bytes, counting the
	// fixed header (as MQTT 5.0's Maximum Packet Size does). Default 1 MiB;
	// a server advertises it in CONNACK. At least 16, at most 268,435,460
	// (the largest remaining length, 268,435,455, plus a 5-byte header).
	MaxPacketSize int
	// ScratchRetain is how much split-packet scratch, in bytes, a parser
	// keeps between packets. A packet cut across reads is copied into
	// scratch; scratch grown beyond this is released once the packet is
	// consumed, so an idle connection holds at most twice this much.
	// Default 16 KiB. Zero releases after every split packet.
	ScratchRetain int
}

// Bounds checked by Validate.
const (
	minPacketSize      = 16
	maxRemainingLength = 268_435_455
	maxPacketSizeCap   = maxRemainingLength + 5
)

// DefaultLimits returns 1 MiB packets and 16 KiB of retained scratch.
func DefaultLimits() Limits {
	return Limits{MaxPacketSize: 1 << 20, ScratchRetain: 16 << 10}
}

// Validate reports the first limit out of range.
func (l Limits) Validate() error {
	switch {
	case l.MaxPacketSize < minPacketSize || l.MaxPacketSize > maxPacketSizeCap:
		return fmt.Errorf("mqttproto: MaxPacketSize %d outside [%d, %d]", l.MaxPacketSize, minPacketSize, maxPacketSizeCap)
	case l.ScratchRetain < 0:
		return fmt.Errorf("mqttproto: ScratchRetain %d is negative", l.ScratchRetain)
	}
	return nil
}
