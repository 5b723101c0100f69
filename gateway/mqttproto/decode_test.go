package mqttproto

import (
	"errors"
	"strings"
	"testing"
)

// raw builds a packet from its first byte and body parts, with a correct
// remaining length, so a test can write any bytes a client could send.
func raw(first byte, parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	var l [4]byte
	n := putVarint(l[:], uint32(len(body)))
	return append(append([]byte{first}, l[:n]...), body...)
}

// s16 is a length-prefixed string or binary field.
func s16(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

func b(v ...byte) []byte { return v }

// propBlock is a property block: its length, then the raw properties.
func propBlock(parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, p...)
	}
	var l [4]byte
	n := putVarint(l[:], uint32(len(body)))
	return append(l[:n:n], body...)
}

// rawConnect is a CONNECT with the given protocol name, level and flags
// (keepalive 30), props (5.0 only) and payload fields.
func rawConnect(name string, level, flags byte, props []byte, payload ...[]byte) []byte {
	parts := [][]byte{s16(name), b(level, flags, 0, 30)}
	if props != nil {
		parts = append(parts, props)
	}
	return raw(0x10, append(parts, payload...)...)
}

// connectFor is a minimal valid CONNECT of version v.
func connectFor(t testing.TB, v Version) []byte {
	if v == Version5 {
		return rawConnect("MQTT", 5, 0x02, propBlock(), s16("c1"))
	}
	return rawConnect("MQTT", 4, 0x02, nil, s16("c1"))
}

type invalidCase struct {
	name      string
	v         Version // of the CONNECT before the packet
	b         []byte
	want      error
	detail    string // in the error text
	noConnect bool   // b is the whole stream
	skipSplit bool
}

var invalidCases = []invalidCase{
	{name: "reserved type 0", v: 4, b: b(0x00, 0x00), want: ErrMalformed, detail: "reserved packet type 0"},
	{name: "first packet not CONNECT", b: b(0xC0, 0x00), want: ErrProtocol, detail: "PINGREQ: the first packet must be CONNECT", noConnect: true},
	{name: "second CONNECT", v: 4, b: rawConnect("MQTT", 4, 0x02, nil, s16("c2")), want: ErrProtocol, detail: "a second CONNECT"},
	{name: "CONNACK from a client", v: 4, b: b(0x20, 0x02, 0x00, 0x00), want: ErrProtocol, detail: "a client never sends it"},
	{name: "SUBACK from a client", v: 5, b: b(0x90, 0x04, 0x00, 0x01, 0x00, 0x00), want: ErrProtocol, detail: "SUBACK: a client never sends it"},
	{name: "AUTH in 3.1.1", v: 4, b: b(0xF0, 0x00), want: ErrMalformed, detail: "AUTH exists in 5.0 only"},
	{name: "PUBLISH QoS 3", v: 4, b: raw(0x36, s16("a"), b(0, 1)), want: ErrMalformed, detail: "QoS 3"},
	{name: "PUBLISH DUP at QoS 0", v: 4, b: raw(0x38, s16("a")), want: ErrMalformed, detail: "DUP set on a QoS 0 message"},
	{name: "PUBREL flags 0000", v: 4, b: b(0x60, 0x02, 0x00, 0x01), want: ErrMalformed, detail: "flags 0000, want 0010"},
	{name: "SUBSCRIBE flags 0000", v: 4, b: raw(0x80, b(0, 1), s16("a"), b(0)), want: ErrMalformed, detail: "want 0010"},
	{name: "PINGREQ flags 0001", v: 4, b: b(0xC1, 0x00), want: ErrMalformed, detail: "flags 0001, want 0000"},
	{name: "remaining length of 5 bytes", v: 4, b: b(0x30, 0xff, 0xff, 0xff, 0xff, 0x01), want: ErrMalformed, detail: "longer than 4 bytes"},
	{name: "remaining length not minimal", v: 4, b: b(0xC0, 0x80, 0x00), want: ErrMalformed, detail: "shortest form"},
	{name: "packet too large", v: 4, b: b(0x30, 0xff, 0x7f), want: ErrPacketTooLarge, detail: "16386 bytes, the limit is 700"},
	{name: "PINGREQ with a body", v: 4, b: b(0xC0, 0x01, 0x00), want: ErrMalformed, detail: "left over"},
	{name: "topic past the end", v: 4, b: b(0x30, 0x02, 0x00, 0x05), want: ErrMalformed, detail: "topic name: runs past the end"},
	{name: "topic invalid UTF-8", v: 4, b: raw(0x30, s16("\xc3\x28")), want: ErrMalformed, detail: "topic name: invalid UTF-8"},
	{name: "topic with U+0000", v: 4, b: raw(0x30, s16("a\x00")), want: ErrMalformed, detail: "U+0000"},
	{name: "topic with a surrogate", v: 4, b: raw(0x30, s16("a\xed\xa0\x80")), want: ErrMalformed, detail: "invalid UTF-8"},
	{name: "topic with U+0000 after non-ASCII", v: 4, b: raw(0x30, s16("é\x00")), want: ErrMalformed, detail: "U+0000"},
	{name: "topic with '+'", v: 4, b: raw(0x30, s16("a/+")), want: ErrTopicName, detail: "PUBLISH topic name: contains a wildcard: topic name invalid"},
	{name: "topic with '#'", v: 5, b: raw(0x30, s16("#"), propBlock()), want: ErrTopicName, detail: "wildcard"},
	{name: "empty topic in 3.1.1", v: 4, b: raw(0x30, s16("")), want: ErrTopicName, detail: "empty"},
	{name: "empty topic without alias", v: 5, b: raw(0x30, s16(""), propBlock()), want: ErrProtocol, detail: "empty without a topic alias"},
	{name: "PUBLISH packet ID 0", v: 4, b: raw(0x32, s16("a"), b(0, 0)), want: ErrProtocol, detail: "packet identifier: zero"},
	{name: "PUBACK 3.1.1 with a reason", v: 4, b: b(0x40, 0x03, 0x00, 0x01, 0x00), want: ErrMalformed, detail: "left over"},
	{name: "PUBACK packet ID 0", v: 4, b: b(0x40, 0x02, 0x00, 0x00), want: ErrProtocol, detail: "zero"},
	{name: "PUBACK short", v: 4, b: b(0x40, 0x01, 0x00), want: ErrMalformed, detail: "runs past"},
	{name: "PUBACK unknown reason", v: 5, b: b(0x40, 0x03, 0x00, 0x01, 0x05), want: ErrProtocol, detail: "0x05 is not a PUBACK reason code"},
	{name: "PUBREL reason of PUBACK", v: 5, b: b(0x62, 0x03, 0x00, 0x01, 0x10), want: ErrProtocol, detail: "not a PUBREL reason code"},
	{name: "property twice", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x01, 1, 0x01, 1))), want: ErrProtocol, detail: "payload format indicator: appears more than once"},
	{name: "property not allowed", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x11, 0, 0, 0, 1))), want: ErrProtocol, detail: "session expiry interval: not allowed in this packet"},
	{name: "unknown property", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x04, 1))), want: ErrMalformed, detail: "property 0x04: unknown property"},
	{name: "property ID in two bytes", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x81, 0x00, 1))), want: ErrMalformed, detail: "shortest form"},
	{name: "topic alias 0", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x23, 0, 0))), want: ErrProtocol, detail: "topic alias: zero"},
	{name: "payload format 2", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x01, 2))), want: ErrProtocol, detail: "value 2, want 0 or 1"},
	{name: "subscription ID from a client", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x0B, 1))), want: ErrProtocol, detail: "must not carry one"},
	{name: "properties past the end", v: 5, b: raw(0x30, s16("a"), b(0x05, 0x01, 0x01)), want: ErrMalformed, detail: "properties: runs past the end"},
	{name: "property value past the block", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x02, 0, 0))), want: ErrMalformed, detail: "message expiry interval: runs past"},
	{name: "user property bad UTF-8", v: 5, b: raw(0x30, s16("a"), propBlock(b(0x26), s16("k"), s16("\xff"))), want: ErrMalformed, detail: "user property value: invalid UTF-8"},
	{name: "SUBSCRIBE without filters", v: 4, b: b(0x82, 0x02, 0x00, 0x01), want: ErrProtocol, detail: "no topic filter"},
	{name: "SUBSCRIBE reserved option bits 3.1.1", v: 4, b: raw(0x82, b(0, 1), s16("a"), b(0x04)), want: ErrMalformed, detail: "reserved bits set (00000100)"},
	{name: "SUBSCRIBE reserved option bits 5.0", v: 5, b: raw(0x82, b(0, 1), propBlock(), s16("a"), b(0x40)), want: ErrMalformed, detail: "reserved bits"},
	{name: "SUBSCRIBE QoS 3", v: 4, b: raw(0x82, b(0, 1), s16("a"), b(0x03)), want: ErrMalformed, detail: "QoS 3"},
	{name: "SUBSCRIBE retain handling 3", v: 5, b: raw(0x82, b(0, 1), propBlock(), s16("a"), b(0x30)), want: ErrProtocol, detail: "retain handling 3"},
	{name: "SUBSCRIBE no local shared", v: 5, b: raw(0x82, b(0, 1), propBlock(), s16("$share/g/a"), b(0x04)), want: ErrProtocol, detail: "no local on a shared subscription"},
	{name: "SUBSCRIBE options missing", v: 4, b: raw(0x82, b(0, 1), s16("a")), want: ErrMalformed, detail: "subscription options: runs past"},
	{name: "SUBSCRIBE filter bad UTF-8", v: 4, b: raw(0x82, b(0, 1), s16("\xc0\x80"), b(0)), want: ErrMalformed, detail: "topic filter: invalid UTF-8"},
	{name: "SUBSCRIBE two subscription IDs", v: 5, b: raw(0x82, b(0, 1), propBlock(b(0x0B, 1, 0x0B, 2)), s16("a"), b(0)), want: ErrProtocol, detail: "appears more than once"},
	{name: "SUBSCRIBE subscription ID 0", v: 5, b: raw(0x82, b(0, 1), propBlock(b(0x0B, 0)), s16("a"), b(0)), want: ErrProtocol, detail: "subscription identifier: zero"},
	{name: "UNSUBSCRIBE without filters", v: 5, b: raw(0xA2, b(0, 1), propBlock()), want: ErrProtocol, detail: "no topic filter"},
	{name: "MQTT 3.1", b: rawConnect("MQIsdp", 3, 0x02, nil, s16("c")), want: ErrUnsupportedVersion, detail: "MQTT 3.1 (MQIsdp)", noConnect: true},
	{name: "level 6", b: rawConnect("MQTT", 6, 0x02, nil, s16("c")), want: ErrUnsupportedVersion, detail: "protocol level: 6", noConnect: true},
	{name: "protocol name", b: rawConnect("MQTX", 4, 0x02, nil, s16("c")), want: ErrUnsupportedVersion, detail: `protocol name: "MQTX"`, noConnect: true},
	{name: "CONNECT reserved flag", b: rawConnect("MQTT", 4, 0x03, nil, s16("c")), want: ErrMalformed, detail: "reserved bit set", noConnect: true},
	{name: "CONNECT will QoS without will", b: rawConnect("MQTT", 4, 0x0A, nil, s16("c")), want: ErrMalformed, detail: "without a will", noConnect: true},
	{name: "CONNECT will QoS 3", b: rawConnect("MQTT", 4, 0x1E, nil, s16("c"), s16("w"), s16("")), want: ErrMalformed, detail: "will QoS 3", noConnect: true},
	{name: "CONNECT password without user 3.1.1", b: rawConnect("MQTT", 4, 0x42, nil, s16("c"), s16("p")), want: ErrMalformed, detail: "password without a user name", noConnect: true},
	{name: "CONNECT empty client ID, persistent", b: rawConnect("MQTT", 4, 0x00, nil, s16("")), want: ErrClientID, detail: "empty with a persistent session", noConnect: true},
	{name: "CONNECT will topic wildcard", b: rawConnect("MQTT", 4, 0x06, nil, s16("c"), s16("w/#"), s16("")), want: ErrTopicName, detail: "will topic: contains a wildcard", noConnect: true},
	{name: "CONNECT bytes left over", b: rawConnect("MQTT", 4, 0x02, nil, s16("c"), b(0)), want: ErrMalformed, detail: "left over", noConnect: true},
	{name: "CONNECT missing will", b: rawConnect("MQTT", 4, 0x06, nil, s16("c")), want: ErrMalformed, detail: "will topic: runs past", noConnect: true},
	{name: "CONNECT bad will property", b: rawConnect("MQTT", 5, 0x06, propBlock(), s16("c"), propBlock(b(0x11, 0, 0, 0, 1)), s16("w"), s16("")), want: ErrProtocol, detail: "will property session expiry interval: not allowed", noConnect: true},
	{name: "CONNECT receive maximum 0", b: rawConnect("MQTT", 5, 0x02, propBlock(b(0x21, 0, 0)), s16("c")), want: ErrProtocol, detail: "receive maximum: zero", noConnect: true},
	{name: "CONNECT maximum packet size 0", b: rawConnect("MQTT", 5, 0x02, propBlock(b(0x27, 0, 0, 0, 0)), s16("c")), want: ErrProtocol, detail: "maximum packet size: zero", noConnect: true},
	{name: "CONNECT client ID bad UTF-8", b: rawConnect("MQTT", 5, 0x02, propBlock(), s16("\xff")), want: ErrMalformed, detail: "client identifier: invalid UTF-8", noConnect: true},
	{name: "DISCONNECT 3.1.1 with a reason", v: 4, b: b(0xE0, 0x01, 0x00), want: ErrMalformed, detail: "left over"},
	{name: "DISCONNECT bad reason", v: 5, b: b(0xE0, 0x01, 0x01), want: ErrProtocol, detail: "not a DISCONNECT reason code"},
	{name: "AUTH bad reason", v: 5, b: b(0xF0, 0x01, 0x80), want: ErrProtocol, detail: "not a AUTH reason code"},
}

func TestInvalidPacketsAreRefused(t *testing.T) {
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.b
			if !tc.noConnect {
				s = append(connectFor(t, tc.v), tc.b...)
			}
			got := parseChunks(t, splitLimits, fromClients, whole(s))
			if got.err != tc.want {
				t.Fatalf("err %v (%s), want %v", got.err, got.msg, tc.want)
			}
			if !strings.Contains(got.msg, tc.detail) {
				t.Fatalf("error %q does not say %q", got.msg, tc.detail)
			}
			if want := 1; !tc.noConnect && len(got.pkts) != want {
				t.Fatalf("%d packets before the error, want the CONNECT only", len(got.pkts))
			}
		})
	}
}

// TestVersionKnownWhenConnectRefused: a CONNECT refused after its protocol
// level still tells the server which version to refuse it in.
func TestVersionKnownWhenConnectRefused(t *testing.T) {
	p, _ := NewParser(DefaultLimits(), ServerSide)
	_ = p.Feed(rawConnect("MQTT", 5, 0x02, propBlock(b(0x21, 0, 0)), s16("c")))
	_, _, err := p.Next()
	if !errors.Is(err, ErrProtocol) || p.Version() != Version5 {
		t.Fatalf("err %v, version %v", err, p.Version())
	}
	var e *Error
	if !errors.As(err, &e) || e.Packet != CONNECT || e.Field != "property receive maximum" {
		t.Fatalf("error %#v", e)
	}
}

func TestReasonCodeOfAndConnackCode311(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason ReasonCode
		code   byte
		ok     bool
	}{
		{nil, Success, 0, false},
		{newErr(ErrMalformed, PUBLISH, "", "x"), MalformedPacket, 0, false},
		{newErr(ErrProtocol, PUBLISH, "", "x"), ProtocolError, 0, false},
		{newErr(ErrPacketTooLarge, PUBLISH, "", "x"), PacketTooLarge, 0, false},
		{newErr(ErrUnsupportedVersion, CONNECT, "", "x"), UnsupportedProtocolVersion, ConnRefusedVersion311, true},
		{newErr(ErrClientID, CONNECT, "", "x"), ClientIdentifierNotValid, ConnRefusedIdentifier311, true},
		{newErr(ErrTopicName, PUBLISH, "", "x"), TopicNameInvalid, 0, false},
		{CheckFilter("a/#/b"), TopicFilterInvalid, 0, false},
		{errors.New("other"), UnspecifiedError, 0, false},
	} {
		if got := ReasonCodeOf(tc.err); got != tc.reason {
			t.Errorf("ReasonCodeOf(%v) = 0x%02x, want 0x%02x", tc.err, byte(got), byte(tc.reason))
		}
		if code, ok := ConnackCode311(tc.err); code != tc.code || ok != tc.ok {
			t.Errorf("ConnackCode311(%v) = %d %v", tc.err, code, ok)
		}
	}
}

// TestDecodeSpecBytes decodes packets written byte by byte from the
// specification's layouts, not by our encoder.
func TestDecodeSpecBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  stream
		b    []byte
		want string
	}{
		{"CONNECT 3.1.1", fromClients,
			rawConnect("MQTT", 4, 0xEE, nil, s16("id"), s16("w/t"), s16("gone"), s16("u"), s16("p")),
			`CONNECT v3.1.1 clean=true keepalive=30 client="id" will(qos=1 retain=true topic="w/t" payload="gone") user="u" pass="p"`},
		{"CONNECT 5.0 empty client ID, no clean start", fromClients,
			rawConnect("MQTT", 5, 0x00, propBlock(b(0x11, 0xff, 0xff, 0xff, 0xff), b(0x21, 0, 10), b(0x26), s16("a"), s16("1"), b(0x26), s16("a"), s16("2")), s16("")),
			`CONNECT v5.0 clean=false keepalive=30 client="" session-expiry-interval=4294967295 receive-maximum=10 user["a"]="1" user["a"]="2"`},
		{"CONNECT 5.0 password without user", fromClients,
			rawConnect("MQTT", 5, 0x42, propBlock(), s16("c"), s16("tok")),
			`CONNECT v5.0 clean=true keepalive=30 client="c" pass="tok"`},
		{"PUBACK 5.0 short forms", fromServer5, b(0x40, 0x02, 0x00, 0x07, 0x40, 0x03, 0x00, 0x08, 0x10, 0x40, 0x04, 0x00, 0x09, 0x80, 0x00),
			"PUBACK v5.0 id=7\nPUBACK v5.0 id=8 reason=0x10\nPUBACK v5.0 id=9 reason=0x80"},
		{"DISCONNECT 5.0 forms", fromServer5, b(0xE0, 0x00, 0xE0, 0x01, 0x8D, 0xE0, 0x02, 0x8B, 0x00),
			"DISCONNECT v5.0\nDISCONNECT v5.0 reason=0x8d\nDISCONNECT v5.0 reason=0x8b"},
		{"PUBLISH from a server with two subscription IDs", fromServer5, raw(0x30, s16("a"), propBlock(b(0x0B, 1, 0x0B, 0x80, 0x01))),
			`PUBLISH v5.0 qos=0 dup=false retain=false topic="a" payload="" subscription-identifier=[1 128]`},
		{"SUBACK 3.1.1", fromServer3, b(0x90, 0x05, 0x00, 0x01, 0x00, 0x02, 0x80),
			"SUBACK v3.1.1 id=1 codes=000280"},
	} {
		got := parseChunks(t, splitLimits, tc.how, whole(tc.b))
		if got.err != nil {
			t.Fatalf("%s: %s", tc.name, got.msg)
		}
		if s := strings.Join(got.pkts, "\n"); s != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, s, tc.want)
		}
	}
}
