package mqttproto

import (
	"fmt"
	"iter"
	"strings"
)

// PropID is an MQTT 5.0 property identifier.
type PropID byte

// Property identifiers (MQTT 5.0 section 2.2.2.2).
const (
	PropPayloadFormat        PropID = 0x01
	PropMessageExpiry        PropID = 0x02
	PropContentType          PropID = 0x03
	PropResponseTopic        PropID = 0x08
	PropCorrelationData      PropID = 0x09
	PropSubscriptionID       PropID = 0x0B
	PropSessionExpiry        PropID = 0x11
	PropAssignedClientID     PropID = 0x12
	PropServerKeepAlive      PropID = 0x13
	PropAuthMethod           PropID = 0x15
	PropAuthData             PropID = 0x16
	PropRequestProblemInfo   PropID = 0x17
	PropWillDelay            PropID = 0x18
	PropRequestResponseInfo  PropID = 0x19
	PropResponseInfo         PropID = 0x1A
	PropServerReference      PropID = 0x1C
	PropReasonString         PropID = 0x1F
	PropReceiveMaximum       PropID = 0x21
	PropTopicAliasMaximum    PropID = 0x22
	PropTopicAlias           PropID = 0x23
	PropMaximumQoS           PropID = 0x24
	PropRetainAvailable      PropID = 0x25
	PropUserProperty         PropID = 0x26
	PropMaximumPacketSize    PropID = 0x27
	PropWildcardSubAvailable PropID = 0x28
	PropSubIDAvailable       PropID = 0x29
	PropSharedSubAvailable   PropID = 0x2A
	maxPropID                       = 0x2A
)

// willProps stands for the will properties of a CONNECT in the allowed
// masks (packet type 0 is reserved, so its bit is free).
const willProps Type = 0

type propKind byte

const (
	kByte    propKind = iota + 1 // a byte that must be 0 or 1
	kByteAny                     // a byte with its own rule (maximum QoS)
	kU16
	kU32
	kVarint
	kString
	kBinary
	kPair
)

type propSpec struct {
	name    string
	kind    propKind
	allowed uint16 // bit t set: allowed in packets of Type t (bit 0: will properties)
}

func mask(ts ...Type) uint16 {
	var m uint16
	for _, t := range ts {
		m |= 1 << t
	}
	return m
}

var propSpecs = [maxPropID + 1]propSpec{
	PropPayloadFormat:        {"payload format indicator", kByte, mask(PUBLISH, willProps)},
	PropMessageExpiry:        {"message expiry interval", kU32, mask(PUBLISH, willProps)},
	PropContentType:          {"content type", kString, mask(PUBLISH, willProps)},
	PropResponseTopic:        {"response topic", kString, mask(PUBLISH, willProps)},
	PropCorrelationData:      {"correlation data", kBinary, mask(PUBLISH, willProps)},
	PropSubscriptionID:       {"subscription identifier", kVarint, mask(PUBLISH, SUBSCRIBE)},
	PropSessionExpiry:        {"session expiry interval", kU32, mask(CONNECT, CONNACK, DISCONNECT)},
	PropAssignedClientID:     {"assigned client identifier", kString, mask(CONNACK)},
	PropServerKeepAlive:      {"server keep alive", kU16, mask(CONNACK)},
	PropAuthMethod:           {"authentication method", kString, mask(CONNECT, CONNACK, AUTH)},
	PropAuthData:             {"authentication data", kBinary, mask(CONNECT, CONNACK, AUTH)},
	PropRequestProblemInfo:   {"request problem information", kByte, mask(CONNECT)},
	PropWillDelay:            {"will delay interval", kU32, mask(willProps)},
	PropRequestResponseInfo:  {"request response information", kByte, mask(CONNECT)},
	PropResponseInfo:         {"response information", kString, mask(CONNACK)},
	PropServerReference:      {"server reference", kString, mask(CONNACK, DISCONNECT)},
	PropReasonString:         {"reason string", kString, mask(CONNACK, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK, DISCONNECT, AUTH)},
	PropReceiveMaximum:       {"receive maximum", kU16, mask(CONNECT, CONNACK)},
	PropTopicAliasMaximum:    {"topic alias maximum", kU16, mask(CONNECT, CONNACK)},
	PropTopicAlias:           {"topic alias", kU16, mask(PUBLISH)},
	PropMaximumQoS:           {"maximum QoS", kByteAny, mask(CONNACK)},
	PropRetainAvailable:      {"retain available", kByte, mask(CONNACK)},
	PropUserProperty:         {"user property", kPair, 0xffff},
	PropMaximumPacketSize:    {"maximum packet size", kU32, mask(CONNECT, CONNACK)},
	PropWildcardSubAvailable: {"wildcard subscription available", kByte, mask(CONNACK)},
	PropSubIDAvailable:       {"subscription identifier available", kByte, mask(CONNACK)},
	PropSharedSubAvailable:   {"shared subscription available", kByte, mask(CONNACK)},
}

func (id PropID) String() string {
	if int(id) < len(propSpecs) && propSpecs[id].name != "" {
		return propSpecs[id].name
	}
	return fmt.Sprintf("property 0x%02x", byte(id))
}

// Properties are the MQTT 5.0 properties of one packet (or of a will).
// Scalar fields hold a value only when Has reports it present; byte slices
// point into the packet. User properties are read lazily from Raw and
// written from User (see UserProperties).
type Properties struct {
	present uint64 // bit id: property id was present (decoded) or is set (to encode)

	PayloadFormat       byte
	MessageExpiry       uint32
	ContentType         []byte
	ResponseTopic       []byte
	CorrelationData     []byte
	SubscriptionID      uint32 // the first one; a server's PUBLISH may carry several (Raw)
	SessionExpiry       uint32
	AssignedClientID    []byte
	ServerKeepAlive     uint16
	AuthMethod          []byte
	AuthData            []byte
	RequestProblemInfo  byte
	WillDelay           uint32
	RequestResponseInfo byte
	ResponseInfo        []byte
	ServerReference     []byte
	ReasonString        []byte
	ReceiveMaximum      uint16
	TopicAliasMaximum   uint16
	TopicAlias          uint16
	MaximumQoS          byte
	RetainAvailable     byte
	MaximumPacketSize   uint32
	WildcardSubAvail    byte
	SubIDAvail          byte
	SharedSubAvail      byte

	// Raw is the decoded property block (without its length), from which
	// UserProperties reads. Nil for properties built to encode.
	Raw []byte
	// User holds user properties to encode, after those in Raw.
	User []UserProperty
}

// UserProperty is one name/value pair.
type UserProperty struct{ Key, Value []byte }

// Has reports whether property id is present.
func (p *Properties) Has(id PropID) bool { return id <= maxPropID && p.present&(1<<id) != 0 }

// Set marks property id present, for encoding; assign its field too.
func (p *Properties) Set(id PropID) { p.present |= 1 << id }

// Clear marks property id absent.
func (p *Properties) Clear(id PropID) { p.present &^= 1 << id }

// Empty reports whether there is no property at all.
func (p *Properties) Empty() bool { return p.present == 0 && len(p.Raw) == 0 && len(p.User) == 0 }

// UserProperties yields the user properties in order: those decoded (read
// from Raw, without allocating) and then those in User.
func (p *Properties) UserProperties() iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		if p.present&(1<<PropUserProperty) != 0 {
			r := reader{b: p.Raw}
			for r.left() > 0 && r.err == nil {
				id := PropID(r.varint(""))
				if id == PropUserProperty {
					k, v := r.bin(""), r.bin("")
					if r.err == nil && !yield(k, v) {
						return
					}
					continue
				}
				skipProp(&r, id)
			}
		}
		for _, u := range p.User {
			if !yield(u.Key, u.Value) {
				return
			}
		}
	}
}

// SubscriptionIDs yields every subscription identifier (a PUBLISH from a
// server carries one per matching subscription).
func (p *Properties) SubscriptionIDs() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		if p.present&(1<<PropSubscriptionID) == 0 {
			return
		}
		if p.Raw == nil {
			yield(p.SubscriptionID)
			return
		}
		r := reader{b: p.Raw}
		for r.left() > 0 && r.err == nil {
			id := PropID(r.varint(""))
			if id == PropSubscriptionID {
				if v := r.varint(""); r.err == nil && !yield(v) {
					return
				}
				continue
			}
			skipProp(&r, id)
		}
	}
}

// skipProp steps over the value of an already validated property.
func skipProp(r *reader, id PropID) {
	if id > maxPropID {
		r.fail(ErrMalformed, "", "unknown property")
		return
	}
	switch propSpecs[id].kind {
	case kByte, kByteAny:
		r.u8("")
	case kU16:
		r.u16("")
	case kU32:
		r.u32("")
	case kVarint:
		r.varint("")
	case kString, kBinary:
		r.bin("")
	case kPair:
		r.bin("")
		r.bin("")
	default:
		r.fail(ErrMalformed, "", "unknown property")
	}
}

// readProps reads a property block (its length and the properties) for a
// packet of type t (willProps for a will). multiSubID allows several
// subscription identifiers (a PUBLISH a server sent).
func (r *reader) readProps(p *Properties, t Type, multiSubID bool) {
	n := int(r.varint("property length"))
	if r.short("properties", n) {
		return
	}
	block := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	p.Raw = block
	pr := reader{b: block, t: r.t}
	for pr.left() > 0 && pr.err == nil {
		start := pr.i
		idv := pr.varint("identifier")
		if pr.err != nil {
			break
		}
		if idv > maxPropID || propSpecs[idv].kind == 0 || pr.i-start != 1 {
			pr.fail(ErrMalformed, fmt.Sprintf("0x%02x", idv), "unknown property")
			break
		}
		id := PropID(idv)
		spec := &propSpecs[id]
		// field is the bare name: no string is built unless a check fails
		// (the prefix is added below).
		field := spec.name
		if spec.allowed&(1<<t) == 0 {
			pr.fail(ErrProtocol, field, "not allowed in this packet")
			break
		}
		if p.present&(1<<id) != 0 && id != PropUserProperty && !(id == PropSubscriptionID && multiSubID) {
			pr.fail(ErrProtocol, field, "appears more than once")
			break
		}
		first := p.present&(1<<id) == 0
		p.present |= 1 << id
		switch spec.kind {
		case kByte:
			v := pr.u8(field)
			if v > 1 {
				pr.fail(ErrProtocol, field, fmt.Sprintf("value %d, want 0 or 1", v))
			}
			p.setByte(id, v)
		case kByteAny:
			v := pr.u8(field)
			if id == PropMaximumQoS && v > 1 {
				pr.fail(ErrProtocol, field, fmt.Sprintf("value %d, want 0 or 1", v))
			}
			p.setByte(id, v)
		case kU16:
			v := pr.u16(field)
			if v == 0 && (id == PropReceiveMaximum || id == PropTopicAlias) {
				pr.fail(ErrProtocol, field, "zero")
			}
			p.setU16(id, v)
		case kU32:
			v := pr.u32(field)
			if v == 0 && id == PropMaximumPacketSize {
				pr.fail(ErrProtocol, field, "zero")
			}
			p.setU32(id, v)
		case kVarint:
			v := pr.varint(field)
			if pr.err == nil && v == 0 {
				pr.fail(ErrProtocol, field, "zero")
			}
			if first {
				p.SubscriptionID = v
			}
		case kString:
			p.setBytes(id, pr.str(field))
		case kBinary:
			p.setBytes(id, pr.bin(field))
		case kPair:
			pr.str("user property name")
			pr.str("user property value")
		}
	}
	if pr.err != nil && r.err == nil {
		if !strings.HasPrefix(pr.err.Field, "user property") {
			pr.err.Field = "property " + pr.err.Field
		}
		if t == willProps {
			pr.err.Field = "will " + pr.err.Field
		}
		r.err = pr.err
	}
}

func (p *Properties) setByte(id PropID, v byte) {
	switch id {
	case PropPayloadFormat:
		p.PayloadFormat = v
	case PropRequestProblemInfo:
		p.RequestProblemInfo = v
	case PropRequestResponseInfo:
		p.RequestResponseInfo = v
	case PropMaximumQoS:
		p.MaximumQoS = v
	case PropRetainAvailable:
		p.RetainAvailable = v
	case PropWildcardSubAvailable:
		p.WildcardSubAvail = v
	case PropSubIDAvailable:
		p.SubIDAvail = v
	case PropSharedSubAvailable:
		p.SharedSubAvail = v
	}
}

func (p *Properties) setU16(id PropID, v uint16) {
	switch id {
	case PropServerKeepAlive:
		p.ServerKeepAlive = v
	case PropReceiveMaximum:
		p.ReceiveMaximum = v
	case PropTopicAliasMaximum:
		p.TopicAliasMaximum = v
	case PropTopicAlias:
		p.TopicAlias = v
	}
}

func (p *Properties) setU32(id PropID, v uint32) {
	switch id {
	case PropMessageExpiry:
		p.MessageExpiry = v
	case PropSessionExpiry:
		p.SessionExpiry = v
	case PropWillDelay:
		p.WillDelay = v
	case PropMaximumPacketSize:
		p.MaximumPacketSize = v
	}
}

func (p *Properties) setBytes(id PropID, v []byte) {
	switch id {
	case PropContentType:
		p.ContentType = v
	case PropResponseTopic:
		p.ResponseTopic = v
	case PropCorrelationData:
		p.CorrelationData = v
	case PropAssignedClientID:
		p.AssignedClientID = v
	case PropAuthMethod:
		p.AuthMethod = v
	case PropAuthData:
		p.AuthData = v
	case PropResponseInfo:
		p.ResponseInfo = v
	case PropServerReference:
		p.ServerReference = v
	case PropReasonString:
		p.ReasonString = v
	}
}

// getByte etc. read a property's field by id, for the encoder.
func (p *Properties) getByte(id PropID) byte {
	switch id {
	case PropPayloadFormat:
		return p.PayloadFormat
	case PropRequestProblemInfo:
		return p.RequestProblemInfo
	case PropRequestResponseInfo:
		return p.RequestResponseInfo
	case PropMaximumQoS:
		return p.MaximumQoS
	case PropRetainAvailable:
		return p.RetainAvailable
	case PropWildcardSubAvailable:
		return p.WildcardSubAvail
	case PropSubIDAvailable:
		return p.SubIDAvail
	case PropSharedSubAvailable:
		return p.SharedSubAvail
	}
	return 0
}

func (p *Properties) getU16(id PropID) uint16 {
	switch id {
	case PropServerKeepAlive:
		return p.ServerKeepAlive
	case PropReceiveMaximum:
		return p.ReceiveMaximum
	case PropTopicAliasMaximum:
		return p.TopicAliasMaximum
	case PropTopicAlias:
		return p.TopicAlias
	}
	return 0
}

func (p *Properties) getU32(id PropID) uint32 {
	switch id {
	case PropMessageExpiry:
		return p.MessageExpiry
	case PropSessionExpiry:
		return p.SessionExpiry
	case PropWillDelay:
		return p.WillDelay
	case PropMaximumPacketSize:
		return p.MaximumPacketSize
	}
	return 0
}

func (p *Properties) getBytes(id PropID) []byte {
	switch id {
	case PropContentType:
		return p.ContentType
	case PropResponseTopic:
		return p.ResponseTopic
	case PropCorrelationData:
		return p.CorrelationData
	case PropAssignedClientID:
		return p.AssignedClientID
	case PropAuthMethod:
		return p.AuthMethod
	case PropAuthData:
		return p.AuthData
	case PropResponseInfo:
		return p.ResponseInfo
	case PropServerReference:
		return p.ServerReference
	case PropReasonString:
		return p.ReasonString
	}
	return nil
}
