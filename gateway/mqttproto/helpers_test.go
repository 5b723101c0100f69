package mqttproto

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// propsText renders the properties present, in identifier order, then the
// user properties, so properties from different parses compare with ==.
func propsText(p *Properties) string {
	var b strings.Builder
	for id := PropID(1); id <= maxPropID; id++ {
		if !p.Has(id) || id == PropUserProperty {
			continue
		}
		spec := propSpecs[id]
		fmt.Fprintf(&b, " %s=", strings.ReplaceAll(spec.name, " ", "-"))
		switch spec.kind {
		case kByte, kByteAny:
			fmt.Fprint(&b, p.getByte(id))
		case kU16:
			fmt.Fprint(&b, p.getU16(id))
		case kU32:
			fmt.Fprint(&b, p.getU32(id))
		case kVarint:
			var ids []uint32
			for v := range p.SubscriptionIDs() {
				ids = append(ids, v)
			}
			fmt.Fprint(&b, ids)
		case kString, kBinary:
			fmt.Fprintf(&b, "%q", p.getBytes(id))
		}
	}
	for k, v := range p.UserProperties() {
		fmt.Fprintf(&b, " user[%q]=%q", k, v)
	}
	return b.String()
}

// pktText renders a packet canonically: only the fields its type has.
func pktText(p Packet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s v%s", p.Type, p.Version)
	if p.PacketID != 0 {
		fmt.Fprintf(&b, " id=%d", p.PacketID)
	}
	switch p.Type {
	case CONNECT:
		c := p.Connect
		fmt.Fprintf(&b, " clean=%v keepalive=%d client=%q", c.CleanStart, c.KeepAlive, c.ClientID)
		if c.Will {
			fmt.Fprintf(&b, " will(qos=%d retain=%v topic=%q payload=%q%s)", c.WillQoS, c.WillRetain, c.WillTopic, c.WillPayload, propsText(&c.WillProps))
		}
		if c.HasUsername {
			fmt.Fprintf(&b, " user=%q", c.Username)
		}
		if c.HasPassword {
			fmt.Fprintf(&b, " pass=%q", c.Password)
		}
	case CONNACK:
		fmt.Fprintf(&b, " present=%v code=0x%02x", p.SessionPresent, byte(p.Reason))
	case PUBLISH:
		fmt.Fprintf(&b, " qos=%d dup=%v retain=%v topic=%q payload=%q", p.QoS, p.Dup, p.Retain, p.Topic, p.Payload)
	case SUBSCRIBE:
		for s := range p.Subscriptions() {
			fmt.Fprintf(&b, " sub(%q qos=%d nl=%v rap=%v rh=%d)", s.Filter, s.QoS, s.NoLocal, s.RetainAsPublished, s.RetainHandling)
		}
	case UNSUBSCRIBE:
		for f := range p.UnsubFilters() {
			fmt.Fprintf(&b, " filter=%q", f)
		}
	case SUBACK, UNSUBACK:
		fmt.Fprintf(&b, " codes=%x", p.ReasonCodes)
	default:
		if p.Reason != 0 {
			fmt.Fprintf(&b, " reason=0x%02x", byte(p.Reason))
		}
	}
	b.WriteString(propsText(&p.Props))
	return b.String()
}

// sentinels are the errors a parse can end with.
var sentinels = []error{ErrMalformed, ErrProtocol, ErrPacketTooLarge, ErrUnsupportedVersion, ErrClientID, ErrTopicName, ErrTopicFilter}

// sentinelOf returns the sentinel err wraps, or err itself when unknown.
func sentinelOf(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// parseResult is what a parse of a whole stream produced.
type parseResult struct {
	pkts    []string
	err     error  // sentinel
	msg     string // the error's text
	pending int    // bytes of an incomplete packet left at the end
}

// stream says how to parse: a side, and for ClientSide the version.
type stream struct {
	side    Side
	version Version
}

var (
	fromClients = stream{side: ServerSide}
	fromServer5 = stream{side: ClientSide, version: Version5}
	fromServer3 = stream{side: ClientSide, version: Version311}
)

// parseChunks runs a read loop over chunks the way a server does: each
// chunk is copied into one reused read buffer, packets are rendered only
// once Next asks for more input (so they must survive the rest of the Feed
// cycle), and the read buffer is scribbled over before the next chunk (so
// nothing may point into old input). It checks scratch bounds at every step.
func parseChunks(t testing.TB, lim Limits, s stream, chunks [][]byte) parseResult {
	t.Helper()
	p, err := NewParser(lim, s.side)
	if err != nil {
		t.Fatalf("NewParser: %v", err)
	}
	if s.side == ClientSide {
		p.SetVersion(s.version)
	}
	readBuf := make([]byte, 0, 64)
	var res parseResult
	var held []Packet
	for _, chunk := range chunks {
		for i := range readBuf { // the previous chunk
			readBuf[i] = 0xEE
		}
		readBuf = append(readBuf[:0], chunk...)
		if err := p.Feed(readBuf); err != nil {
			t.Fatalf("Feed: %v", err)
		}
		for {
			pkt, ok, err := p.Next()
			checkScratchBounds(t, p)
			if err != nil {
				for _, h := range held {
					res.pkts = append(res.pkts, pktText(h))
				}
				res.err, res.msg = sentinelOf(err), err.Error()
				if _, _, again := p.Next(); again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				return res
			}
			if !ok {
				break
			}
			held = append(held, pkt)
		}
		for _, h := range held {
			res.pkts = append(res.pkts, pktText(h))
		}
		held = held[:0]
	}
	res.pending = p.Pending()
	return res
}

func checkScratchBounds(t testing.TB, p *Parser) {
	t.Helper()
	for i, s := range p.scratch {
		if cap(s) > max(p.lim.MaxPacketSize, maxHeader) {
			t.Fatalf("scratch %d has %d bytes, beyond MaxPacketSize %d", i, cap(s), p.lim.MaxPacketSize)
		}
	}
}

func sameResult(t testing.TB, what string, want, got parseResult) {
	t.Helper()
	if want.err != got.err || want.msg != got.msg || want.pending != got.pending || len(want.pkts) != len(got.pkts) {
		t.Fatalf("%s:\n got %d packets, err %v (%s), pending %d\nwant %d packets, err %v (%s), pending %d\n got %q\nwant %q",
			what, len(got.pkts), got.err, got.msg, got.pending, len(want.pkts), want.err, want.msg, want.pending, got.pkts, want.pkts)
	}
	for i := range want.pkts {
		if want.pkts[i] != got.pkts[i] {
			t.Fatalf("%s: packet %d\n got %s\nwant %s", what, i, got.pkts[i], want.pkts[i])
		}
	}
}

func whole(b []byte) [][]byte { return [][]byte{b} }

func cutAt(b []byte, at ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, a := range at {
		out = append(out, b[prev:a])
		prev = a
	}
	return append(out, b[prev:])
}

func byteByByte(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func mustAppend(t testing.TB, p Packet) []byte {
	t.Helper()
	b, err := Append(nil, &p)
	if err != nil {
		t.Fatalf("Append %s: %v", p.Type, err)
	}
	return b
}

func props(set func(p *Properties)) Properties {
	var p Properties
	set(&p)
	return p
}

func user(kv ...string) []UserProperty {
	var out []UserProperty
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, UserProperty{[]byte(kv[i]), []byte(kv[i+1])})
	}
	return out
}
