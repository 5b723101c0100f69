package mqttproto

import (
	"strings"
	"testing"
)

// pr builds properties from id/value pairs (values: int for numbers,
// string for strings and binary) and user properties from "user" pairs.
func pr(kv ...any) Properties {
	var p Properties
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "user" {
			pair := kv[i+1].([2]string)
			p.User = append(p.User, UserProperty{[]byte(pair[0]), []byte(pair[1])})
			continue
		}
		id := kv[i].(PropID)
		p.Set(id)
		switch v := kv[i+1].(type) {
		case int:
			switch propSpecs[id].kind {
			case kByte, kByteAny:
				p.setByte(id, byte(v))
			case kU16:
				p.setU16(id, uint16(v))
			case kU32:
				p.setU32(id, uint32(v))
			case kVarint:
				p.SubscriptionID = uint32(v)
			}
		case string:
			p.setBytes(id, []byte(v))
		}
	}
	return p
}

var bigPayload = strings.Repeat("x", 600)

// clientPackets returns one of every kind of packet a client sends, in
// version v, the CONNECT first.
func clientPackets(t testing.TB, v Version) [][]byte {
	v5 := v == Version5
	connect := &Connect{
		CleanStart: true, KeepAlive: 60, ClientID: []byte("sensor-1"),
		Will: true, WillQoS: 1, WillRetain: true, WillTopic: []byte("telemetry/sensor-1/status"), WillPayload: []byte("offline"),
		HasUsername: true, Username: []byte("dev"), HasPassword: true, Password: []byte("s3cr\x00t"),
	}
	var cprops Properties
	if v5 {
		cprops = pr(PropSessionExpiry, 3600, PropReceiveMaximum, 20, PropMaximumPacketSize, 65536,
			PropTopicAliasMaximum, 10, PropRequestProblemInfo, 1, PropRequestResponseInfo, 0,
			PropAuthMethod, "SCRAM-SHA-1", PropAuthData, "\x01\x02",
			"user", [2]string{"site", "kitchen"}, "user", [2]string{"site", "hall"})
		connect.WillProps = pr(PropWillDelay, 30, PropPayloadFormat, 1, PropMessageExpiry, 600,
			PropContentType, "text/plain", PropResponseTopic, "r/1", PropCorrelationData, "\xff\x00",
			"user", [2]string{"why", "power"})
	}
	pubProps := Properties{}
	if v5 {
		pubProps = pr(PropPayloadFormat, 1, PropMessageExpiry, 30, PropTopicAlias, 3,
			PropContentType, "application/json", "user", [2]string{"unit", "°C"}, "user", [2]string{"unit", "K"})
	}
	pkts := []Packet{
		{Type: CONNECT, Props: cprops, Connect: connect},
		{Type: PUBLISH, Topic: []byte("telemetry/dev-1"), Payload: []byte(`{"t":21.5}`)},
		{Type: PUBLISH, QoS: 1, PacketID: 1, Topic: []byte("telemetry/dev-2"), Payload: []byte(`{"t":21.6}`), Props: pubProps},
		{Type: PUBLISH, QoS: 2, PacketID: 65535, Dup: true, Retain: true, Topic: []byte("telemetry/dev-3"), Payload: []byte(bigPayload)},
		{Type: PUBLISH, QoS: 1, PacketID: 7, Topic: []byte("t/ünï"), Payload: nil},
		{Type: PUBACK, PacketID: 9},
		{Type: PUBREC, PacketID: 10},
		{Type: PUBREL, PacketID: 10},
		{Type: PUBCOMP, PacketID: 10},
		{Type: SUBSCRIBE, PacketID: 2, Subs: []Subscription{
			{Filter: []byte("telemetry/#"), QoS: 1},
			{Filter: []byte("$share/workers/telemetry/+/data"), QoS: 2},
			{Filter: []byte("a/+/b"), QoS: 0},
		}},
		{Type: UNSUBSCRIBE, PacketID: 3, Filters: [][]byte{[]byte("telemetry/#"), []byte("$share/workers/telemetry/+/data")}},
		{Type: PINGREQ},
		{Type: DISCONNECT},
	}
	if v5 {
		pkts = append(pkts,
			Packet{Type: PUBLISH, QoS: 1, PacketID: 8, Topic: nil, Payload: []byte("by alias"), Props: pr(PropTopicAlias, 3)},
			Packet{Type: PUBACK, PacketID: 11, Reason: NoMatchingSubscribers},
			Packet{Type: PUBREC, PacketID: 12, Reason: QuotaExceeded, Props: pr(PropReasonString, "full", "user", [2]string{"k", "v"})},
			Packet{Type: PUBREL, PacketID: 12, Reason: PacketIdentifierNotFound},
			Packet{Type: PUBCOMP, PacketID: 12, Props: pr(PropReasonString, "ok")},
			Packet{Type: SUBSCRIBE, PacketID: 4, Props: pr(PropSubscriptionID, 268435455, "user", [2]string{"a", "b"}), Subs: []Subscription{
				{Filter: []byte("cmd/+"), QoS: 1, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
				{Filter: []byte("$share/g/x"), QoS: 0, RetainHandling: 1},
			}},
			Packet{Type: UNSUBSCRIBE, PacketID: 5, Props: pr("user", [2]string{"a", "b"}), Filters: [][]byte{[]byte("cmd/+")}},
			Packet{Type: AUTH, Reason: ContinueAuthentication, Props: pr(PropAuthMethod, "SCRAM-SHA-1", PropAuthData, "xyz")},
			Packet{Type: AUTH},
			Packet{Type: DISCONNECT, Reason: DisconnectWithWill, Props: pr(PropSessionExpiry, 0, PropReasonString, "bye")},
			Packet{Type: DISCONNECT, Reason: NotAuthorized},
		)
	}
	out := make([][]byte, len(pkts))
	for i := range pkts {
		pkts[i].Version = v
		out[i] = mustAppend(t, pkts[i])
	}
	return out
}

// serverPackets returns one of every kind of packet a server sends.
func serverPackets(t testing.TB, v Version) [][]byte {
	v5 := v == Version5
	pkts := []Packet{
		{Type: CONNACK},
		{Type: CONNACK, SessionPresent: true},
		{Type: PUBLISH, QoS: 1, PacketID: 1, Topic: []byte("telemetry/dev-1"), Payload: []byte("21.5")},
		{Type: PUBLISH, Topic: []byte("telemetry/dev-2"), Retain: true, Payload: []byte(bigPayload)},
		{Type: PUBACK, PacketID: 1},
		{Type: PUBREC, PacketID: 2},
		{Type: PUBREL, PacketID: 2},
		{Type: PUBCOMP, PacketID: 2},
		{Type: SUBACK, PacketID: 3, ReasonCodes: []byte{0, 1, 2, 0x80}},
		{Type: UNSUBACK, PacketID: 4},
		{Type: PINGRESP},
	}
	if v5 {
		pkts[8].ReasonCodes = []byte{0, 1, 2, byte(TopicFilterInvalid), byte(SharedSubscriptionsNotSupported)}
		pkts[9].ReasonCodes = []byte{0, byte(NoSubscriptionExisted)}
		pkts = append(pkts,
			Packet{Type: CONNACK, Props: pr(PropSessionExpiry, 60, PropAssignedClientID, "auto-1", PropServerKeepAlive, 30,
				PropReceiveMaximum, 20, PropTopicAliasMaximum, 8, PropMaximumQoS, 1, PropRetainAvailable, 1,
				PropMaximumPacketSize, 1<<20, PropWildcardSubAvailable, 1, PropSubIDAvailable, 0, PropSharedSubAvailable, 1,
				PropResponseInfo, "resp/", PropReasonString, "welcome", "user", [2]string{"node", "gw-1"})},
			Packet{Type: CONNACK, Reason: NotAuthorized, Props: pr(PropReasonString, "no")},
			Packet{Type: PUBLISH, QoS: 2, PacketID: 9, Dup: true, Topic: []byte("telemetry/dev-3"), Payload: []byte("x"),
				Props: pr(PropSubscriptionID, 5, PropCorrelationData, "c", "user", [2]string{"Edgeq-Seq", "17"})},
			Packet{Type: PUBACK, PacketID: 5, Reason: TopicNameInvalid, Props: pr(PropReasonString, "bad device")},
			Packet{Type: SUBACK, PacketID: 6, ReasonCodes: []byte{1}, Props: pr(PropReasonString, "ok")},
			Packet{Type: DISCONNECT, Reason: KeepAliveTimeout, Props: pr(PropServerReference, "gw-2:1883")},
			Packet{Type: AUTH, Reason: ReAuthenticate},
		)
	} else {
		pkts = append(pkts, Packet{Type: CONNACK, Reason: ReasonCode(ConnRefusedBadUserPass311)})
	}
	out := make([][]byte, len(pkts))
	for i := range pkts {
		pkts[i].Version = v
		out[i] = mustAppend(t, pkts[i])
	}
	return out
}
