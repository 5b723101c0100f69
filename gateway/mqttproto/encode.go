package mqttproto

import (
	"fmt"
	"math/bits"
)

// Append appends the encoding of p to dst, in p.Version (which must be
// Version311 or Version5; for CONNECT it is the protocol level sent). It
// refuses, with an *Error and dst unchanged, what would not decode: a zero
// packet ID where one is needed, QoS 3, a string or binary field over
// 65,535 bytes, a remaining length over 268,435,455 bytes, a 3.1.1 packet
// that only exists in 5.0. It allocates only when dst must grow.
func Append(dst []byte, p *Packet) ([]byte, error) {
	if p.Version != Version311 && p.Version != Version5 {
		return dst, newErr(ErrUnsupportedVersion, p.Type, "", fmt.Sprintf("cannot encode version %d", p.Version))
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0) // room for the longest fixed header
	w := writer{b: dst, t: p.Type, v5: p.Version == Version5}
	first := w.body(p)
	if w.err != nil {
		return dst[:start], w.err
	}
	dst = w.b
	rl := len(dst) - start - maxHeader
	if rl > maxRemainingLength {
		return dst[:start], newErr(ErrPacketTooLarge, p.Type, "", fmt.Sprintf("remaining length %d", rl))
	}
	var hdr [maxHeader]byte
	hdr[0] = first
	n := 1 + putVarint(hdr[1:], uint32(rl))
	copy(dst[start+n:], dst[start+maxHeader:])
	copy(dst[start:], hdr[:n])
	return dst[:len(dst)-(maxHeader-n)], nil
}

// AppendAck appends a PUBACK, PUBREC, PUBREL or PUBCOMP. In 5.0 a Success
// reason is left out (the 2-byte form); in 3.1.1 reason must be Success.
func AppendAck(dst []byte, v Version, t Type, id uint16, reason ReasonCode) ([]byte, error) {
	switch t {
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
	default:
		return dst, newErr(ErrProtocol, t, "", "not an acknowledgement")
	}
	return Append(dst, &Packet{Type: t, Version: v, PacketID: id, Reason: reason})
}

// writer appends one packet body; the first failure is kept.
type writer struct {
	b   []byte
	t   Type
	v5  bool
	err *Error
}

func (w *writer) fail(sentinel error, field, detail string) {
	if w.err == nil {
		w.err = newErr(sentinel, w.t, field, detail)
	}
}

func (w *writer) u8(v byte)    { w.b = append(w.b, v) }
func (w *writer) u16(v uint16) { w.b = append(w.b, byte(v>>8), byte(v)) }
func (w *writer) u32(v uint32) { w.b = append(w.b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v)) }

func (w *writer) varint(v uint32) {
	var tmp [4]byte
	w.b = append(w.b, tmp[:putVarint(tmp[:], v)]...)
}

func (w *writer) bin(field string, v []byte) {
	if len(v) > 0xffff {
		w.fail(ErrMalformed, field, fmt.Sprintf("%d bytes, at most 65535", len(v)))
		return
	}
	w.u16(uint16(len(v)))
	w.b = append(w.b, v...)
}

func (w *writer) str(field string, v []byte) {
	if d := checkUTF8(v); d != "" {
		w.fail(ErrMalformed, field, d)
		return
	}
	w.bin(field, v)
}

func (w *writer) packetID(id uint16) {
	if id == 0 {
		w.fail(ErrProtocol, "packet identifier", "zero")
	}
	w.u16(id)
}

func (w *writer) reason(c ReasonCode) {
	if !ValidReason(w.t, c) {
		w.fail(ErrProtocol, "reason code", fmt.Sprintf("0x%02x is not a %s reason code", byte(c), w.t))
	}
	w.u8(byte(c))
}

// body appends the variable header and payload and returns the first byte
// of the fixed header.
func (w *writer) body(p *Packet) byte {
	first := byte(p.Type) << 4
	switch p.Type {
	case CONNECT:
		w.connect(p)
	case CONNACK:
		if p.SessionPresent {
			w.u8(1)
		} else {
			w.u8(0)
		}
		if w.v5 {
			w.reason(p.Reason)
			w.props(&p.Props, CONNACK)
		} else {
			if p.Reason > 5 {
				w.fail(ErrProtocol, "return code", fmt.Sprintf("%d is not a 3.1.1 CONNACK code", p.Reason))
			}
			w.u8(byte(p.Reason))
		}
	case PUBLISH:
		if p.QoS > 2 {
			w.fail(ErrMalformed, "fixed header", "QoS 3")
		}
		first |= p.QoS << 1
		if p.Dup {
			if p.QoS == 0 {
				w.fail(ErrMalformed, "fixed header", "DUP set on a QoS 0 message")
			}
			first |= 0x08
		}
		if p.Retain {
			first |= 0x01
		}
		w.str("topic name", p.Topic)
		if p.QoS > 0 {
			w.packetID(p.PacketID)
		}
		if w.v5 {
			w.props(&p.Props, PUBLISH)
		}
		w.b = append(w.b, p.Payload...)
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		if p.Type == PUBREL {
			first |= 0x02
		}
		w.packetID(p.PacketID)
		if w.v5 {
			if p.Reason != Success || !p.Props.Empty() {
				w.reason(p.Reason)
			}
			if !p.Props.Empty() {
				w.props(&p.Props, p.Type)
			}
		} else if p.Reason != Success {
			w.fail(ErrProtocol, "reason code", "3.1.1 has no reason codes in acknowledgements")
		}
	case SUBSCRIBE:
		first |= 0x02
		w.packetID(p.PacketID)
		if w.v5 {
			w.props(&p.Props, SUBSCRIBE)
		}
		n := 0
		for s := range p.Subscriptions() {
			w.str("topic filter", s.Filter)
			w.u8(s.options())
			n++
		}
		if n == 0 {
			w.fail(ErrProtocol, "payload", "no topic filter")
		}
	case SUBACK, UNSUBACK:
		w.packetID(p.PacketID)
		if w.v5 {
			w.props(&p.Props, p.Type)
		}
		if p.Type == SUBACK || w.v5 {
			if len(p.ReasonCodes) == 0 {
				w.fail(ErrProtocol, "reason codes", "none")
			}
			w.b = append(w.b, p.ReasonCodes...)
		}
	case UNSUBSCRIBE:
		first |= 0x02
		w.packetID(p.PacketID)
		if w.v5 {
			w.props(&p.Props, UNSUBSCRIBE)
		}
		n := 0
		for f := range p.UnsubFilters() {
			w.str("topic filter", f)
			n++
		}
		if n == 0 {
			w.fail(ErrProtocol, "payload", "no topic filter")
		}
	case PINGREQ, PINGRESP:
	case DISCONNECT, AUTH:
		if p.Type == AUTH && !w.v5 {
			w.fail(ErrProtocol, "", "AUTH exists in 5.0 only")
		}
		if w.v5 && (p.Reason != Success || !p.Props.Empty()) {
			w.reason(p.Reason)
			if !p.Props.Empty() {
				w.props(&p.Props, p.Type)
			}
		}
	default:
		w.fail(ErrMalformed, "fixed header", "reserved packet type")
	}
	return first
}

func (w *writer) connect(p *Packet) {
	c := p.Connect
	if c == nil {
		w.fail(ErrProtocol, "", "no Connect fields")
		return
	}
	w.str("protocol name", protoMQTT)
	w.u8(byte(p.Version))
	var flags byte
	if c.CleanStart {
		flags |= 0x02
	}
	if c.Will {
		flags |= 0x04 | (c.WillQoS&3)<<3
		if c.WillRetain {
			flags |= 0x20
		}
		if c.WillQoS > 2 {
			w.fail(ErrMalformed, "connect flags", "will QoS 3")
		}
	}
	if c.HasPassword {
		flags |= 0x40
	}
	if c.HasUsername {
		flags |= 0x80
	}
	w.u8(flags)
	w.u16(c.KeepAlive)
	if w.v5 {
		w.props(&p.Props, CONNECT)
	}
	w.str("client identifier", c.ClientID)
	if c.Will {
		if w.v5 {
			w.props(&c.WillProps, willProps)
		}
		w.str("will topic", c.WillTopic)
		w.bin("will payload", c.WillPayload)
	}
	if c.HasUsername {
		w.str("user name", c.Username)
	}
	if c.HasPassword {
		w.bin("password", c.Password)
	}
}

// props appends a property block: its length, then every property present.
func (w *writer) props(p *Properties, t Type) {
	start := len(w.b)
	w.b = append(w.b, 0, 0, 0, 0) // room for the longest length
	for set := p.present &^ (1 << PropUserProperty); set != 0; set &= set - 1 {
		id := PropID(bits.TrailingZeros64(set))
		if id > maxPropID {
			w.fail(ErrProtocol, fmt.Sprintf("property 0x%02x", byte(id)), "unknown property")
			return
		}
		spec := &propSpecs[id]
		if spec.kind == 0 || spec.allowed&(1<<t) == 0 {
			w.fail(ErrProtocol, "property "+id.String(), "not allowed in this packet")
			return
		}
		if id == PropSubscriptionID {
			for sid := range p.SubscriptionIDs() {
				if sid == 0 || sid > maxRemainingLength {
					w.fail(ErrProtocol, "property "+spec.name, fmt.Sprintf("%d outside [1, %d]", sid, maxRemainingLength))
					return
				}
				w.u8(byte(id))
				w.varint(sid)
			}
			continue
		}
		w.u8(byte(id))
		switch spec.kind {
		case kByte, kByteAny:
			w.u8(p.getByte(id))
		case kU16:
			w.u16(p.getU16(id))
		case kU32:
			w.u32(p.getU32(id))
		case kString:
			w.str("property "+spec.name, p.getBytes(id))
		case kBinary:
			w.bin("property "+spec.name, p.getBytes(id))
		}
	}
	for k, v := range p.UserProperties() {
		w.u8(byte(PropUserProperty))
		w.str("user property name", k)
		w.str("user property value", v)
	}
	n := len(w.b) - start - 4
	if n > maxRemainingLength {
		w.fail(ErrPacketTooLarge, "properties", fmt.Sprintf("%d bytes", n))
		return
	}
	var tmp [4]byte
	m := putVarint(tmp[:], uint32(n))
	copy(w.b[start+m:], w.b[start+4:])
	copy(w.b[start:], tmp[:m])
	w.b = w.b[:len(w.b)-(4-m)]
}

// putVarint writes v (at most 268,435,455) as a Variable Byte Integer and
// returns its length.
func putVarint(b []byte, v uint32) int {
	n := 0
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v > 0 {
			c |= 0x80
		}
		b[n] = c
		n++
		if v == 0 {
			return n
		}
	}
}
