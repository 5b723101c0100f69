package mqttproto

import "iter"

// Packet is one decoded control packet, or one to encode. Which fields
// apply depends on Type; byte slices point into the parser's input and stay
// valid until the next Feed (see Parser).
type Packet struct {
	Type    Type
	Version Version // the protocol the packet was decoded under, or is to be encoded in

	PacketID uint16 // PUBLISH with QoS > 0, the acks, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK

	// PUBLISH
	Topic   []byte
	Payload []byte
	QoS     byte
	Dup     bool
	Retain  bool

	// Reason is the 5.0 reason code of CONNACK, PUBACK, PUBREC, PUBREL,
	// PUBCOMP, DISCONNECT and AUTH, or the 3.1.1 CONNACK return code.
	Reason ReasonCode
	// SessionPresent: CONNACK.
	SessionPresent bool

	// Props are the 5.0 properties of any packet but PINGREQ and PINGRESP.
	Props Properties

	// Connect holds the fields of a CONNECT.
	Connect *Connect

	// ReasonCodes of SUBACK (one per filter; in 3.1.1 the granted QoS or
	// 0x80) and of a 5.0 UNSUBACK.
	ReasonCodes []byte

	// subs is the decoded SUBSCRIBE or UNSUBSCRIBE payload; Subs and
	// Filters are entries to encode after it.
	subs []byte
	// Subs are subscriptions of a SUBSCRIBE to encode (see Subscriptions).
	Subs []Subscription
	// Filters are topic filters of an UNSUBSCRIBE to encode (see UnsubFilters).
	Filters [][]byte
}

// Connect is the variable header and payload of a CONNECT.
type Connect struct {
	ProtocolName []byte // "MQTT" (or "MQIsdp", which is refused)
	CleanStart   bool   // Clean Session in 3.1.1
	KeepAlive    uint16 // seconds; 0 disables the keepalive
	ClientID     []byte

	Will        bool
	WillQoS     byte
	WillRetain  bool
	WillProps   Properties
	WillTopic   []byte
	WillPayload []byte

	HasUsername bool
	Username    []byte
	HasPassword bool
	Password    []byte
}

// Subscription is one entry of a SUBSCRIBE.
type Subscription struct {
	Filter            []byte
	QoS               byte // maximum QoS
	NoLocal           bool // 5.0
	RetainAsPublished bool // 5.0
	RetainHandling    byte // 5.0: 0 send retained, 1 only on a new subscription, 2 never
}

// Subscriptions yields the entries of a SUBSCRIBE: those decoded, without
// allocating, and then those in Subs.
func (p *Packet) Subscriptions() iter.Seq[Subscription] {
	return func(yield func(Subscription) bool) {
		if p.Type == SUBSCRIBE {
			r := reader{b: p.subs}
			for r.left() > 0 {
				f := r.bin("")
				o := r.u8("")
				if r.err != nil || !yield(subFromOptions(f, o)) {
					return
				}
			}
		}
		for _, s := range p.Subs {
			if !yield(s) {
				return
			}
		}
	}
}

// UnsubFilters yields the topic filters of an UNSUBSCRIBE: those decoded,
// without allocating, and then those in Filters.
func (p *Packet) UnsubFilters() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if p.Type == UNSUBSCRIBE {
			r := reader{b: p.subs}
			for r.left() > 0 {
				f := r.bin("")
				if r.err != nil || !yield(f) {
					return
				}
			}
		}
		for _, f := range p.Filters {
			if !yield(f) {
				return
			}
		}
	}
}

func subFromOptions(f []byte, o byte) Subscription {
	return Subscription{
		Filter:            f,
		QoS:               o & 0x03,
		NoLocal:           o&0x04 != 0,
		RetainAsPublished: o&0x08 != 0,
		RetainHandling:    (o >> 4) & 0x03,
	}
}

func (s Subscription) options() byte {
	o := s.QoS & 0x03
	if s.NoLocal {
		o |= 0x04
	}
	if s.RetainAsPublished {
		o |= 0x08
	}
	return o | (s.RetainHandling&0x03)<<4
}
