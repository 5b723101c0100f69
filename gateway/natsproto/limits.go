package natsproto

import "fmt"

// Limits bound what one Parser accepts and keeps in memory.
type Limits struct {
	// MaxControlLine is the longest control line accepted, in bytes, counting
	// the verb and its arguments but not the line ending. Default 4096, the
	// nats-server default. At least 32, at most 1 MiB.
	MaxControlLine int
	// MaxPayload is the largest PUB payload, or HPUB header block plus
	// payload, in bytes. Default 1 MiB, the nats-server default; the server
	// advertises it as max_payload in INFO. At most 64 MiB, the nats-server cap.
	MaxPayload int
	// ScratchRetain is how much split-frame scratch, in bytes, a parser keeps
	// between frames. A frame cut across reads is copied into scratch; scratch
	// grown beyond this for a large payload is released once the op is
	// consumed, so an idle connection holds at most twice this much. Default
	// 16 KiB. Zero releases after every split frame.
	ScratchRetain int
}

// Bounds checked by Validate.
const (
	minControlLine = 32
	maxControlLine = 1 << 20
	maxPayloadCap  = 64 << 20
)

// DefaultLimits returns the limits nats-server uses by default.
func DefaultLimits() Limits {
	return Limits{
		MaxControlLine: 4096,
		MaxPayload:     1 << 20,
		ScratchRetain:  16 << 10,
	}
}

// Validate reports the first limit out of range.
func (l Limits) Validate() error {
	switch {
	case l.MaxControlLine < minControlLine || l.MaxControlLine > maxControlLine:
		return fmt.Errorf("natsproto: MaxControlLine %d outside [%d, %d]", l.MaxControlLine, minControlLine, maxControlLine)
	case l.MaxPayload < 0 || l.MaxPayload > maxPayloadCap:
		return fmt.Errorf("natsproto: MaxPayload %d outside [0, %d]", l.MaxPayload, maxPayloadCap)
	case l.ScratchRetain < 0:
		return fmt.Errorf("natsproto: ScratchRetain %d is negative", l.ScratchRetain)
	}
	return nil
}

// maxFrame is the largest frame the parser can hold: a control line with its
// CRLF, a payload and its CRLF. Scratch never grows beyond it.
func (l Limits) maxFrame() int {
	return l.MaxControlLine + 2 + l.MaxPayload + 2
}
