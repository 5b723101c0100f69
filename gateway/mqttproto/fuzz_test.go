package mqttproto

import (
	"bytes"
	"testing"
)

// fuzzLimits are small so that random input reaches every limit.
var fuzzLimits = Limits{MaxPacketSize: 512, ScratchRetain: 96}

// fuzzStreams are the ways FuzzParser reads its input, chosen by mode.
var fuzzStreams = []stream{fromClients, fromServer5, fromServer3}

// chunksFrom cuts data into reads whose lengths are taken from cuts in turn
// (a zero is an empty read, at most len(data)+1 of them, so long runs of
// zeros cannot make one input run for minutes); no cuts means one byte per
// read.
func chunksFrom(data, cuts []byte) [][]byte {
	allZero := true
	for _, c := range cuts {
		allZero = allZero && c == 0
	}
	if allZero {
		return append(byteByByte(data), nil)
	}
	var chunks [][]byte
	empty, maxEmpty := 0, len(data)+1
	for i := 0; len(data) > 0; i++ {
		n := min(int(cuts[i%len(cuts)]), len(data))
		if n == 0 {
			if empty++; empty > maxEmpty {
				continue
			}
		}
		chunks = append(chunks, data[:n])
		data = data[n:]
	}
	return chunks
}

// FuzzParser checks that the parser never panics, stays within its limits
// (checked inside parseChunks), parses a stream cut anywhere exactly as the
// uncut stream, and that the packets it accepts re-encode to a stream that
// parses back to the same packets.
func FuzzParser(f *testing.F) {
	for _, sc := range streamCases(f) {
		mode := byte(0)
		if sc.how == fromServer5 {
			mode = 1
		} else if sc.how == fromServer3 {
			mode = 2
		}
		f.Add(bytes.Join(sc.pkts, nil), []byte{1, 7, 0, 64}, mode)
		for i, p := range sc.pkts {
			if mode == 0 && i > 0 {
				p = append(append([]byte{}, sc.pkts[0]...), p...)
			}
			f.Add(p, []byte{3}, mode)
		}
	}
	for _, tc := range invalidCases {
		s := tc.b
		if !tc.noConnect {
			s = append(connectFor(f, tc.v), tc.b...)
		}
		f.Add(s, []byte{5}, byte(0))
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte, mode byte) {
		how := fuzzStreams[int(mode)%len(fuzzStreams)]
		want := parseChunks(t, fuzzLimits, how, whole(data))
		sameResult(t, "cut by fuzz input", want, parseChunks(t, fuzzLimits, how, chunksFrom(data, cuts)))
		if len(data) <= 1024 {
			sameResult(t, "byte by byte", want, parseChunks(t, fuzzLimits, how, byteByByte(data)))
		}
		checkReencode(t, how, data, want.pkts)
	})
}

// checkReencode re-encodes the packets parsed from data and parses them
// again: the same packets (as rendered by pktText) must come back.
func checkReencode(t *testing.T, how stream, data []byte, want []string) {
	pkts, _ := decodeAll(t, Limits{MaxPacketSize: maxPacketSizeCap, ScratchRetain: 0}, how, data)
	if len(pkts) < len(want) {
		// decodeAll stops at an incomplete packet; parseChunks rendered
		// only the complete ones, so this cannot happen.
		t.Fatalf("%d packets on a second parse, %d on the first", len(pkts), len(want))
	}
	pkts = pkts[:len(want)]
	var s []byte
	for i := range pkts {
		var err error
		if s, err = Append(s, &pkts[i]); err != nil {
			t.Fatalf("packet %s does not re-encode: %v", pktText(pkts[i]), err)
		}
	}
	again := parseChunks(t, Limits{MaxPacketSize: maxPacketSizeCap}, how, whole(s))
	if again.err != nil {
		t.Fatalf("re-encoded stream fails: %s", again.msg)
	}
	if len(again.pkts) != len(want) {
		t.Fatalf("re-encoded stream has %d packets, want %d", len(again.pkts), len(want))
	}
	for i := range want {
		if again.pkts[i] != want[i] {
			t.Fatalf("packet %d re-encoded:\n got %s\nwant %s", i, again.pkts[i], want[i])
		}
	}
}

// FuzzTopics checks MatchTopic against the split-based definition, and
// that CheckFilter and CheckTopicName never panic and agree on strings and
// bytes.
func FuzzTopics(f *testing.F) {
	for _, s := range [][2]string{
		{"a/+", "a/b"}, {"a/#", "a"}, {"#", "$SYS/x"}, {"+/+", "/"}, {"a/#/b", "a/x/b"}, {"$share/g/a/+", "a/b"},
		{"", ""}, {"+", ""}, {"a\x00", "a\x00"}, {"\xff/+", "\xff/a"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		ferr, terr := CheckFilter(filter), CheckTopicName(topic)
		if (CheckFilter([]byte(filter)) == nil) != (ferr == nil) || (CheckTopicName([]byte(topic)) == nil) != (terr == nil) {
			t.Fatalf("string and byte checks disagree on %q, %q", filter, topic)
		}
		if ferr != nil && sentinelOf(ferr) != ErrTopicFilter || terr != nil && sentinelOf(terr) != ErrTopicName {
			t.Fatalf("wrong sentinels: %v, %v", ferr, terr)
		}
		if _, _, shared := ParseShared([]byte(filter)); ferr != nil || terr != nil || shared {
			return
		}
		got := MatchTopic(filter, topic)
		if want := referenceMatch(filter, topic); got != want {
			t.Fatalf("MatchTopic(%q, %q) = %v, reference says %v", filter, topic, got, want)
		}
		if MatchTopic([]byte(filter), []byte(topic)) != got {
			t.Fatalf("MatchTopic on bytes disagrees for %q, %q", filter, topic)
		}
		if filter == topic && !got {
			t.Fatalf("%q does not match itself", topic)
		}
	})
}

// FuzzAppendPublish checks that a PUBLISH built from arbitrary fields is
// either refused by Append or decodes to the same fields.
func FuzzAppendPublish(f *testing.F) {
	f.Add(true, "telemetry/dev-1", []byte(`{"t":1}`), byte(1), uint16(7), false, true, uint16(0), "unit", "C", uint32(30))
	f.Add(false, "a/+", []byte{}, byte(0), uint16(0), true, false, uint16(3), "", "\x00", uint32(0))
	f.Fuzz(func(t *testing.T, v5 bool, topic string, payload []byte, qos byte, id uint16, dup, retain bool, alias uint16, k, v string, expiry uint32) {
		p := Packet{Type: PUBLISH, Version: Version311, Topic: []byte(topic), Payload: payload, QoS: qos % 4, PacketID: id, Dup: dup, Retain: retain}
		if v5 {
			p.Version = Version5
			p.Props = pr(PropMessageExpiry, int(expiry), "user", [2]string{k, v})
			if alias != 0 {
				p.Props.Set(PropTopicAlias)
				p.Props.TopicAlias = alias
			}
		}
		enc, err := Append(nil, &p)
		if err != nil {
			return
		}
		if p.QoS == 0 {
			p.PacketID = 0 // a QoS 0 PUBLISH has none; Append leaves it out
		}
		got, err := decodeAll(t, DefaultLimits(), stream{side: ClientSide, version: p.Version}, enc)
		if err != nil {
			if sentinelOf(err) == ErrTopicName || sentinelOf(err) == ErrProtocol && len(topic) == 0 {
				return // Append writes any UTF-8 topic; the decoder checks wildcards
			}
			t.Fatalf("%s encoded as % x does not decode: %v", pktText(p), enc, err)
		}
		if len(got) != 1 || pktText(got[0]) != pktText(p) {
			if len(got) == 0 {
				t.Fatalf("% x decodes to nothing, want %s", enc, pktText(p))
			}
			t.Fatalf("decoded %s, want %s", pktText(got[0]), pktText(p))
		}
	})
}
