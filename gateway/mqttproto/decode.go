package mqttproto

import (
	"bytes"
	"fmt"
)

// streamState is what the parser knows about the stream that changes how
// packets decode: the side it reads for, the version of the CONNECT (0
// before it), and whether the CONNECT has been seen.
type streamState struct {
	side      Side
	version   Version
	connected bool
}

// header is a decoded fixed header.
type header struct {
	t     Type
	flags byte
	total int // fixed header plus remaining length
	hlen  int // fixed header length
}

// parseHeader checks the fixed header at the start of b. complete is false,
// with a nil error, while b is too short to tell the packet's length.
// Errors depend only on the bytes seen, so a packet cut anywhere fails as
// the uncut one does.
func parseHeader(b []byte, st *streamState, lim *Limits) (h header, complete bool, err error) {
	if len(b) == 0 {
		return h, false, nil
	}
	h.t, h.flags = Type(b[0]>>4), b[0]&0x0f
	if err := checkType(h.t, h.flags, st); err != nil {
		return h, false, err
	}
	rl, n, res := readVarint(b[1:])
	switch res {
	case varintShort:
		return h, false, nil
	case varintTooLong:
		return h, false, newErr(ErrMalformed, h.t, "remaining length", "longer than 4 bytes")
	case varintNotMinimal:
		return h, false, newErr(ErrMalformed, h.t, "remaining length", "not in its shortest form")
	}
	h.hlen = 1 + n
	h.total = h.hlen + int(rl)
	if h.total > lim.MaxPacketSize {
		return h, false, newErr(ErrPacketTooLarge, h.t, "", fmt.Sprintf("%d bytes, the limit is %d", h.total, lim.MaxPacketSize))
	}
	return h, true, nil
}

// checkType checks the first byte of a fixed header against the stream.
func checkType(t Type, flags byte, st *streamState) error {
	switch {
	case t == 0:
		return newErr(ErrMalformed, 0, "fixed header", "reserved packet type 0")
	case st.side == ServerSide && !st.connected && t != CONNECT:
		return newErr(ErrProtocol, t, "", "the first packet must be CONNECT")
	case st.side == ServerSide && st.connected && t == CONNECT:
		return newErr(ErrProtocol, t, "", "a second CONNECT")
	case st.side == ServerSide && !t.fromClient():
		return newErr(ErrProtocol, t, "", "a client never sends it")
	case st.side == ClientSide && !t.fromServer():
		return newErr(ErrProtocol, t, "", "a server never sends it")
	case t == AUTH && st.version != Version5:
		return newErr(ErrMalformed, 0, "fixed header", "reserved packet type 15 (AUTH exists in 5.0 only)")
	}
	switch t {
	case PUBLISH:
		qos := (flags >> 1) & 3
		if qos == 3 {
			return newErr(ErrMalformed, t, "fixed header", "QoS 3")
		}
		if qos == 0 && flags&0x08 != 0 {
			return newErr(ErrMalformed, t, "fixed header", "DUP set on a QoS 0 message")
		}
	case PUBREL, SUBSCRIBE, UNSUBSCRIBE:
		if flags != 0x02 {
			return newErr(ErrMalformed, t, "fixed header", fmt.Sprintf("flags %04b, want 0010", flags))
		}
	default:
		if flags != 0 {
			return newErr(ErrMalformed, t, "fixed header", fmt.Sprintf("flags %04b, want 0000", flags))
		}
	}
	return nil
}

// decode decodes the body of a packet whose fixed header is h into p (a
// zero Packet). It updates st after a CONNECT.
func decode(p *Packet, h header, body []byte, st *streamState) error {
	r := reader{b: body, t: h.t}
	p.Type, p.Version = h.t, st.version
	v5 := st.version == Version5
	switch h.t {
	case CONNECT:
		decodeConnect(&r, p, st)
	case CONNACK:
		f := r.u8("acknowledge flags")
		if r.err == nil && f&0xfe != 0 {
			r.fail(ErrMalformed, "acknowledge flags", fmt.Sprintf("reserved bits set (%08b)", f))
		}
		p.SessionPresent = f&1 != 0
		p.Reason = ReasonCode(r.u8("return code"))
		if r.err == nil {
			if v5 && !ValidReason(CONNACK, p.Reason) || !v5 && p.Reason > 5 {
				r.fail(ErrProtocol, "return code", fmt.Sprintf("0x%02x is not a CONNACK code", byte(p.Reason)))
			}
		}
		if v5 {
			r.readProps(&p.Props, CONNACK, false)
		}
	case PUBLISH:
		p.QoS = (h.flags >> 1) & 3
		p.Dup = h.flags&0x08 != 0
		p.Retain = h.flags&0x01 != 0
		p.Topic = r.str("topic name")
		if p.QoS > 0 {
			p.PacketID = readPacketID(&r)
		}
		if v5 {
			r.readProps(&p.Props, PUBLISH, st.side == ClientSide)
			if r.err == nil && st.side == ServerSide && p.Props.Has(PropSubscriptionID) {
				r.fail(ErrProtocol, "property subscription identifier", "a client's PUBLISH must not carry one")
			}
		}
		p.Payload = r.rest()
		if r.err == nil {
			// UTF-8 is checked already; what CheckTopicName adds is this.
			switch {
			case len(p.Topic) == 0 && v5 && !p.Props.Has(PropTopicAlias):
				r.fail(ErrProtocol, "topic name", "empty without a topic alias")
			case len(p.Topic) == 0 && !v5:
				r.fail(ErrTopicName, "topic name", "empty")
			case bytes.IndexByte(p.Topic, '+') >= 0 || bytes.IndexByte(p.Topic, '#') >= 0:
				r.fail(ErrTopicName, "topic name", "contains a wildcard")
			}
		}
	case PUBACK, PUBREC, PUBREL, PUBCOMP:
		p.PacketID = readPacketID(&r)
		if v5 {
			if r.left() > 0 {
				p.Reason = readReason(&r, h.t)
			}
			if r.left() > 0 {
				r.readProps(&p.Props, h.t, false)
			}
		}
	case SUBSCRIBE:
		p.PacketID = readPacketID(&r)
		if v5 {
			r.readProps(&p.Props, SUBSCRIBE, false)
		}
		p.subs = r.rest()
		decodeSubscriptions(p.subs, v5, &r)
	case SUBACK:
		p.PacketID = readPacketID(&r)
		if v5 {
			r.readProps(&p.Props, SUBACK, false)
		}
		p.ReasonCodes = r.rest()
		if r.err == nil && len(p.ReasonCodes) == 0 {
			r.fail(ErrProtocol, "return codes", "none")
		}
		for _, c := range p.ReasonCodes {
			if r.err == nil && (v5 && !ValidReason(SUBACK, ReasonCode(c)) || !v5 && c > 2 && c != SubackFailure311) {
				r.fail(ErrProtocol, "return codes", fmt.Sprintf("0x%02x is not a SUBACK code", c))
			}
		}
	case UNSUBSCRIBE:
		p.PacketID = readPacketID(&r)
		if v5 {
			r.readProps(&p.Props, UNSUBSCRIBE, false)
		}
		p.subs = r.rest()
		sub := reader{b: p.subs, t: UNSUBSCRIBE}
		for sub.left() > 0 && sub.err == nil {
			sub.str("topic filter")
		}
		if sub.err == nil && len(p.subs) == 0 {
			sub.fail(ErrProtocol, "payload", "no topic filter")
		}
		if r.err == nil {
			r.err = sub.err
		}
	case UNSUBACK:
		p.PacketID = readPacketID(&r)
		if v5 {
			r.readProps(&p.Props, UNSUBACK, false)
			p.ReasonCodes = r.rest()
			if r.err == nil && len(p.ReasonCodes) == 0 {
				r.fail(ErrProtocol, "reason codes", "none")
			}
			for _, c := range p.ReasonCodes {
				if r.err == nil && !ValidReason(UNSUBACK, ReasonCode(c)) {
					r.fail(ErrProtocol, "reason codes", fmt.Sprintf("0x%02x is not an UNSUBACK code", c))
				}
			}
		}
	case PINGREQ, PINGRESP:
	case DISCONNECT, AUTH:
		if v5 {
			if r.left() > 0 {
				p.Reason = readReason(&r, h.t)
			}
			if r.left() > 0 {
				r.readProps(&p.Props, h.t, false)
			}
		}
	}
	r.end()
	if r.err != nil {
		*p = Packet{}
		return r.err
	}
	if h.t == CONNECT {
		st.connected = true
	}
	return nil
}

func readPacketID(r *reader) uint16 {
	id := r.u16("packet identifier")
	if r.err == nil && id == 0 {
		r.fail(ErrProtocol, "packet identifier", "zero")
	}
	return id
}

func readReason(r *reader, t Type) ReasonCode {
	c := ReasonCode(r.u8("reason code"))
	if r.err == nil && !ValidReason(t, c) {
		r.fail(ErrProtocol, "reason code", fmt.Sprintf("0x%02x is not a %s reason code", byte(c), t))
	}
	return c
}

var (
	protoMQTT   = []byte("MQTT")
	protoMQIsdp = []byte("MQIsdp")
)

func decodeConnect(r *reader, p *Packet, st *streamState) {
	c := &Connect{}
	p.Connect = c
	c.ProtocolName = r.str("protocol name")
	level := Version(r.u8("protocol level"))
	if r.err != nil {
		return
	}
	switch {
	case bytes.Equal(c.ProtocolName, protoMQIsdp) && level == Version31:
		r.fail(ErrUnsupportedVersion, "protocol level", "MQTT 3.1 (MQIsdp); 3.1.1 and 5.0 are supported")
		return
	case !bytes.Equal(c.ProtocolName, protoMQTT):
		r.fail(ErrUnsupportedVersion, "protocol name", fmt.Sprintf("%q, want \"MQTT\"", c.ProtocolName))
		return
	case level != Version311 && level != Version5:
		r.fail(ErrUnsupportedVersion, "protocol level", fmt.Sprintf("%d; 4 (3.1.1) and 5 (5.0) are supported", level))
		return
	}
	st.version, p.Version = level, level
	v5 := level == Version5
	flags := r.u8("connect flags")
	c.CleanStart = flags&0x02 != 0
	c.Will = flags&0x04 != 0
	c.WillQoS = (flags >> 3) & 3
	c.WillRetain = flags&0x20 != 0
	c.HasPassword = flags&0x40 != 0
	c.HasUsername = flags&0x80 != 0
	switch {
	case r.err != nil:
	case flags&0x01 != 0:
		r.fail(ErrMalformed, "connect flags", "reserved bit set")
	case !c.Will && (c.WillQoS != 0 || c.WillRetain):
		r.fail(ErrMalformed, "connect flags", "will QoS or retain without a will")
	case c.WillQoS == 3:
		r.fail(ErrMalformed, "connect flags", "will QoS 3")
	case !v5 && c.HasPassword && !c.HasUsername:
		r.fail(ErrMalformed, "connect flags", "a password without a user name")
	}
	c.KeepAlive = r.u16("keep alive")
	if v5 {
		r.readProps(&p.Props, CONNECT, false)
	}
	c.ClientID = r.str("client identifier")
	if c.Will {
		if v5 {
			r.readProps(&c.WillProps, willProps, false)
		}
		c.WillTopic = r.str("will topic")
		c.WillPayload = r.bin("will payload")
		if r.err == nil {
			if err := CheckTopicName(c.WillTopic); err != nil {
				r.fail(ErrTopicName, "will topic", err.(*Error).Detail)
			}
		}
	}
	if c.HasUsername {
		c.Username = r.str("user name")
	}
	if c.HasPassword {
		c.Password = r.bin("password")
	}
	if r.err == nil && !v5 && len(c.ClientID) == 0 && !c.CleanStart {
		r.fail(ErrClientID, "client identifier", "empty with a persistent session (clean session 0)")
	}
}

// decodeSubscriptions validates a SUBSCRIBE payload: UTF-8 filters and
// options with no reserved bits; filter syntax is checked per filter by
// the server with CheckFilter, so one bad filter refuses only itself.
func decodeSubscriptions(b []byte, v5 bool, r *reader) {
	if r.err != nil {
		return
	}
	sub := reader{b: b, t: SUBSCRIBE}
	for sub.left() > 0 && sub.err == nil {
		f := sub.str("topic filter")
		o := sub.u8("subscription options")
		if sub.err != nil {
			break
		}
		reserved := byte(0xfc)
		if v5 {
			reserved = 0xc0
		}
		s := subFromOptions(f, o)
		switch {
		case o&reserved != 0:
			sub.fail(ErrMalformed, "subscription options", fmt.Sprintf("reserved bits set (%08b)", o))
		case s.QoS == 3:
			sub.fail(ErrMalformed, "subscription options", "QoS 3")
		case s.RetainHandling == 3:
			sub.fail(ErrProtocol, "subscription options", "retain handling 3")
		case s.NoLocal && bytes.HasPrefix(f, sharePrefix):
			sub.fail(ErrProtocol, "subscription options", "no local on a shared subscription")
		}
	}
	if sub.err == nil && len(b) == 0 {
		sub.fail(ErrProtocol, "payload", "no topic filter")
	}
	r.err = sub.err
}
