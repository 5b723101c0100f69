package mqttproto

import (
	"errors"
	"fmt"
)

// Sentinel errors. The parser wraps them in an *Error naming the packet and
// the field; test with errors.Is, map with ReasonCodeOf and ConnackCode311.
var (
	// ErrMalformed: the bytes do not follow the packet's layout (bad fixed
	// header flags, a remaining length over 4 bytes, a field running past
	// the packet, bytes left over, invalid UTF-8, an unknown property).
	ErrMalformed = errors.New("malformed packet")
	// ErrProtocol: well formed, but against a rule of the protocol (a zero
	// packet ID, a duplicated or misplaced property, a second CONNECT, a
	// packet the other side never sends).
	ErrProtocol = errors.New("protocol error")
	// ErrPacketTooLarge: the packet is larger than Limits.MaxPacketSize.
	ErrPacketTooLarge = errors.New("packet too large")
	// ErrUnsupportedVersion: CONNECT asks for a protocol other than 3.1.1 or 5.0.
	ErrUnsupportedVersion = errors.New("unsupported protocol version")
	// ErrClientID: the client identifier is not acceptable (3.1.1: empty
	// with a persistent session).
	ErrClientID = errors.New("client identifier not valid")
	// ErrTopicName: a topic name that is empty, has wildcards or U+0000.
	ErrTopicName = errors.New("topic name invalid")
	// ErrTopicFilter: a topic filter with misplaced wildcards or a malformed
	// shared subscription (returned by CheckFilter, answered per filter).
	ErrTopicFilter = errors.New("topic filter invalid")
)

// ErrUnreadInput is returned by Feed when the previous buffer has not been
// drained with Next yet. It is a caller bug and changes no parser state.
var ErrUnreadInput = errors.New("mqttproto: Feed called before Next drained the previous buffer")

// Error is what the parser and the checkers return: which packet, which
// field, what was wrong, and the sentinel (Unwrap) that decides the answer.
type Error struct {
	Packet Type   // 0 when the packet type itself is unknown
	Field  string // e.g. "topic name", "property 0x23 (topic alias)"
	Detail string // e.g. "zero packet identifier"
	Err    error  // one of the sentinels above
}

func (e *Error) Error() string {
	where := "packet"
	if e.Packet != 0 {
		where = e.Packet.String()
	}
	if e.Field != "" {
		where += " " + e.Field
	}
	return fmt.Sprintf("mqttproto: %s: %s: %s", where, e.Detail, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func newErr(sentinel error, t Type, field, detail string) *Error {
	return &Error{Packet: t, Field: field, Detail: detail, Err: sentinel}
}

// ReasonCodeOf maps an error from this package to the MQTT 5.0 reason code
// a server sends with it (in CONNACK before a session, in DISCONNECT after);
// any other error is UnspecifiedError.
func ReasonCodeOf(err error) ReasonCode {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, ErrMalformed):
		return MalformedPacket
	case errors.Is(err, ErrProtocol):
		return ProtocolError
	case errors.Is(err, ErrPacketTooLarge):
		return PacketTooLarge
	case errors.Is(err, ErrUnsupportedVersion):
		return UnsupportedProtocolVersion
	case errors.Is(err, ErrClientID):
		return ClientIdentifierNotValid
	case errors.Is(err, ErrTopicName):
		return TopicNameInvalid
	case errors.Is(err, ErrTopicFilter):
		return TopicFilterInvalid
	}
	return UnspecifiedError
}

// ConnackCode311 returns the 3.1.1 CONNACK return code that refuses a
// connection for err, and false when 3.1.1 has none: then the server closes
// the connection without a CONNACK, as 3.1.1 requires for a malformed
// packet or a protocol violation.
func ConnackCode311(err error) (byte, bool) {
	switch {
	case errors.Is(err, ErrUnsupportedVersion):
		return ConnRefusedVersion311, true
	case errors.Is(err, ErrClientID):
		return ConnRefusedIdentifier311, true
	}
	return 0, false
}
