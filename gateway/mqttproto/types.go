package mqttproto

import "fmt"

// Type is an MQTT control packet type (the high nibble of the first byte).
type Type byte

// Control packet types.
const (
	CONNECT     Type = 1
	CONNACK     Type = 2
	PUBLISH     Type = 3
	PUBACK      Type = 4
	PUBREC      Type = 5
	PUBREL      Type = 6
	PUBCOMP     Type = 7
	SUBSCRIBE   Type = 8
	SUBACK      Type = 9
	UNSUBSCRIBE Type = 10
	UNSUBACK    Type = 11
	PINGREQ     Type = 12
	PINGRESP    Type = 13
	DISCONNECT  Type = 14
	AUTH        Type = 15 // MQTT 5.0 only
)

var typeNames = [...]string{
	"RESERVED", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
	"SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH",
}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", byte(t))
}

// fromClient reports whether a client sends packets of type t. PUBLISH, the
// acknowledgements, DISCONNECT and AUTH go both ways.
func (t Type) fromClient() bool {
	switch t {
	case CONNACK, SUBACK, UNSUBACK, PINGRESP:
		return false
	}
	return true
}

// fromServer reports whether a server sends packets of type t.
func (t Type) fromServer() bool {
	switch t {
	case CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ:
		return false
	}
	return true
}

// Version is the protocol level of the CONNECT packet.
type Version byte

// Protocol versions. Version31 (protocol name "MQIsdp") is recognised only
// to refuse it with the right code.
const (
	Version31  Version = 3
	Version311 Version = 4
	Version5   Version = 5
)

func (v Version) String() string {
	switch v {
	case Version31:
		return "3.1"
	case Version311:
		return "3.1.1"
	case Version5:
		return "5.0"
	}
	return fmt.Sprintf("Version(%d)", byte(v))
}

// Side says which end of a connection a Parser reads for.
type Side byte

const (
	// ServerSide parses what clients send: the first packet must be CONNECT,
	// and packets only a server sends are protocol errors.
	ServerSide Side = iota
	// ClientSide parses what servers send (tests, tools, a bridge); the
	// version is set with SetVersion, as the client chose it in its CONNECT.
	ClientSide
)

// ReasonCode is an MQTT 5.0 reason code (a 3.1.1 CONNACK return code is a
// plain byte; see ConnackCode311).
type ReasonCode byte

// Reason codes (MQTT 5.0 section 2.4).
const (
	Success                             ReasonCode = 0x00 // also Normal disconnection, Granted QoS 0
	GrantedQoS1                         ReasonCode = 0x01
	GrantedQoS2                         ReasonCode = 0x02
	DisconnectWithWill                  ReasonCode = 0x04
	NoMatchingSubscribers               ReasonCode = 0x10
	NoSubscriptionExisted               ReasonCode = 0x11
	ContinueAuthentication              ReasonCode = 0x18
	ReAuthenticate                      ReasonCode = 0x19
	UnspecifiedError                    ReasonCode = 0x80
	MalformedPacket                     ReasonCode = 0x81
	ProtocolError                       ReasonCode = 0x82
	ImplementationSpecificError         ReasonCode = 0x83
	UnsupportedProtocolVersion          ReasonCode = 0x84
	ClientIdentifierNotValid            ReasonCode = 0x85
	BadUserNameOrPassword               ReasonCode = 0x86
	NotAuthorized                       ReasonCode = 0x87
	ServerUnavailable                   ReasonCode = 0x88
	ServerBusy                          ReasonCode = 0x89
	Banned                              ReasonCode = 0x8A
	ServerShuttingDown                  ReasonCode = 0x8B
	BadAuthenticationMethod             ReasonCode = 0x8C
	KeepAliveTimeout                    ReasonCode = 0x8D
	SessionTakenOver                    ReasonCode = 0x8E
	TopicFilterInvalid                  ReasonCode = 0x8F
	TopicNameInvalid                    ReasonCode = 0x90
	PacketIdentifierInUse               ReasonCode = 0x91
	PacketIdentifierNotFound            ReasonCode = 0x92
	ReceiveMaximumExceeded              ReasonCode = 0x93
	TopicAliasInvalid                   ReasonCode = 0x94
	PacketTooLarge                      ReasonCode = 0x95
	MessageRateTooHigh                  ReasonCode = 0x96
	QuotaExceeded                       ReasonCode = 0x97
	AdministrativeAction                ReasonCode = 0x98
	PayloadFormatInvalid                ReasonCode = 0x99
	RetainNotSupported                  ReasonCode = 0x9A
	QoSNotSupported                     ReasonCode = 0x9B
	UseAnotherServer                    ReasonCode = 0x9C
	ServerMoved                         ReasonCode = 0x9D
	SharedSubscriptionsNotSupported     ReasonCode = 0x9E
	ConnectionRateExceeded              ReasonCode = 0x9F
	MaximumConnectTime                  ReasonCode = 0xA0
	SubscriptionIdentifiersNotSupported ReasonCode = 0xA1
	WildcardSubscriptionsNotSupported   ReasonCode = 0xA2
)

// IsError reports whether the code reports a failure (0x80 and above).
func (r ReasonCode) IsError() bool { return r >= 0x80 }

// validReasons lists, per packet type, the reason codes MQTT 5.0 allows in it.
var validReasons = map[Type][]ReasonCode{
	CONNACK: {Success, UnspecifiedError, MalformedPacket, ProtocolError, ImplementationSpecificError,
		UnsupportedProtocolVersion, ClientIdentifierNotValid, BadUserNameOrPassword, NotAuthorized,
		ServerUnavailable, ServerBusy, Banned, BadAuthenticationMethod, TopicNameInvalid, PacketTooLarge,
		QuotaExceeded, PayloadFormatInvalid, RetainNotSupported, QoSNotSupported, UseAnotherServer,
		ServerMoved, ConnectionRateExceeded},
	PUBACK: {Success, NoMatchingSubscribers, UnspecifiedError, ImplementationSpecificError, NotAuthorized,
		TopicNameInvalid, PacketIdentifierInUse, QuotaExceeded, PayloadFormatInvalid},
	PUBREL:  {Success, PacketIdentifierNotFound},
	PUBCOMP: {Success, PacketIdentifierNotFound},
	SUBACK: {Success, GrantedQoS1, GrantedQoS2, UnspecifiedError, ImplementationSpecificError, NotAuthorized,
		TopicFilterInvalid, PacketIdentifierInUse, QuotaExceeded, SharedSubscriptionsNotSupported,
		SubscriptionIdentifiersNotSupported, WildcardSubscriptionsNotSupported},
	UNSUBACK: {Success, NoSubscriptionExisted, UnspecifiedError, ImplementationSpecificError, NotAuthorized,
		TopicFilterInvalid, PacketIdentifierInUse},
	DISCONNECT: {Success, DisconnectWithWill, UnspecifiedError, MalformedPacket, ProtocolError,
		ImplementationSpecificError, NotAuthorized, ServerBusy, ServerShuttingDown, KeepAliveTimeout,
		SessionTakenOver, TopicFilterInvalid, TopicNameInvalid, ReceiveMaximumExceeded, TopicAliasInvalid,
		PacketTooLarge, MessageRateTooHigh, QuotaExceeded, AdministrativeAction, PayloadFormatInvalid,
		RetainNotSupported, QoSNotSupported, UseAnotherServer, ServerMoved, SharedSubscriptionsNotSupported,
		ConnectionRateExceeded, MaximumConnectTime, SubscriptionIdentifiersNotSupported,
		WildcardSubscriptionsNotSupported},
	AUTH: {Success, ContinueAuthentication, ReAuthenticate},
}

// reasonOK is validReasons as a bitmap per type, for a branch-free check.
var reasonOK [16][4]uint64

func init() {
	validReasons[PUBREC] = validReasons[PUBACK]
	for t, codes := range validReasons {
		for _, c := range codes {
			reasonOK[t][c/64] |= 1 << (c % 64)
		}
	}
}

// ValidReason reports whether MQTT 5.0 allows code c in a packet of type t.
func ValidReason(t Type, c ReasonCode) bool {
	return int(t) < len(reasonOK) && reasonOK[t][c/64]&(1<<(c%64)) != 0
}

// 3.1.1 CONNACK return codes.
const (
	ConnAccepted311             byte = 0
	ConnRefusedVersion311       byte = 1
	ConnRefusedIdentifier311    byte = 2
	ConnRefusedUnavailable311   byte = 3
	ConnRefusedBadUserPass311   byte = 4
	ConnRefusedNotAuthorized311 byte = 5
)

// SUBACK return code for a refused subscription in 3.1.1.
const SubackFailure311 byte = 0x80
