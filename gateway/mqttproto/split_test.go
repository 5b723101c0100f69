package mqttproto

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// splitLimits are small enough that the streams below cross ScratchRetain
// and come close to MaxPacketSize, so scratch growth and release are
// exercised too.
var splitLimits = Limits{MaxPacketSize: 700, ScratchRetain: 200}

// streamCase is a packet stream and how to parse it.
type streamCase struct {
	name string
	how  stream
	pkts [][]byte
}

func streamCases(t testing.TB) []streamCase {
	return []streamCase{
		{"client 3.1.1", fromClients, clientPackets(t, Version311)},
		{"client 5.0", fromClients, clientPackets(t, Version5)},
		{"server 3.1.1", fromServer3, serverPackets(t, Version311)},
		{"server 5.0", fromServer5, serverPackets(t, Version5)},
	}
}

// TestEveryPacketSplitAtEveryOffset feeds each packet (after the CONNECT
// it needs) cut at every offset, and cut twice at every pair for the short
// ones, and byte by byte: the result is the uncut one.
func TestEveryPacketSplitAtEveryOffset(t *testing.T) {
	for _, sc := range streamCases(t) {
		var prefix []byte
		if sc.how.side == ServerSide {
			prefix = sc.pkts[0]
		}
		for i, pkt := range sc.pkts {
			s := append(append([]byte{}, prefix...), pkt...)
			if i == 0 && sc.how.side == ServerSide {
				s = pkt
			}
			want := parseChunks(t, splitLimits, sc.how, whole(s))
			if want.err != nil || want.pending != 0 {
				t.Fatalf("%s packet %d does not parse: %+v", sc.name, i, want)
			}
			from := len(prefix)
			if i == 0 && sc.how.side == ServerSide {
				from = 0
			}
			for c := from; c <= len(s); c++ {
				sameResult(t, fmt.Sprintf("%s packet %d cut at %d", sc.name, i, c), want, parseChunks(t, splitLimits, sc.how, cutAt(s, c)))
			}
			if len(pkt) <= 64 {
				// Cut twice within the packet (the CONNECT before it is
				// covered by its own round).
				for c := from; c <= len(s); c++ {
					for d := c; d <= len(s); d++ {
						sameResult(t, fmt.Sprintf("%s packet %d cut at %d,%d", sc.name, i, c, d), want, parseChunks(t, splitLimits, sc.how, cutAt(s, c, d)))
					}
				}
			}
			sameResult(t, fmt.Sprintf("%s packet %d byte by byte", sc.name, i), want, parseChunks(t, splitLimits, sc.how, byteByByte(s)))
		}
	}
}

// TestLongStreamSplitAtEveryOffset parses each stream (every packet kind
// once) cut at every offset and byte by byte, and three rounds of it in
// random chunks.
func TestLongStreamSplitAtEveryOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sc := range streamCases(t) {
		s := bytes.Join(sc.pkts, nil)
		want := parseChunks(t, splitLimits, sc.how, whole(s))
		if want.err != nil || len(want.pkts) != len(sc.pkts) {
			t.Fatalf("%s whole: %d packets (want %d), err %v", sc.name, len(want.pkts), len(sc.pkts), want.msg)
		}
		for c := 0; c <= len(s); c++ {
			sameResult(t, fmt.Sprintf("%s cut at %d", sc.name, c), want, parseChunks(t, splitLimits, sc.how, cutAt(s, c)))
		}
		sameResult(t, sc.name+" byte by byte", want, parseChunks(t, splitLimits, sc.how, byteByByte(s)))

		rest := sc.pkts
		if sc.how.side == ServerSide {
			rest = sc.pkts[1:]
		}
		for range 2 {
			s = append(s, bytes.Join(rest, nil)...)
		}
		want = parseChunks(t, splitLimits, sc.how, whole(s))
		if n := len(sc.pkts) + 2*len(rest); want.err != nil || len(want.pkts) != n {
			t.Fatalf("%s three rounds: %d packets (want %d), err %v", sc.name, len(want.pkts), n, want.msg)
		}
		for round := range 100 {
			var chunks [][]byte
			for r := s; len(r) > 0; {
				n := min(rng.IntN(800), len(r))
				chunks = append(chunks, r[:n])
				r = r[n:]
			}
			sameResult(t, fmt.Sprintf("%s random chunks, round %d", sc.name, round), want, parseChunks(t, splitLimits, sc.how, chunks))
		}
	}
}

// TestFailingStreamsSplitAtEveryOffset: a stream ending in a bad packet
// fails the same way, after the same packets, wherever it is cut.
func TestFailingStreamsSplitAtEveryOffset(t *testing.T) {
	for _, tc := range invalidCases {
		if tc.skipSplit {
			continue
		}
		prefix := connectFor(t, tc.v)
		s := append(append([]byte{}, prefix...), tc.b...)
		if tc.noConnect {
			s = tc.b
		}
		want := parseChunks(t, splitLimits, fromClients, whole(s))
		if want.err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		for c := 0; c <= len(s); c++ {
			sameResult(t, fmt.Sprintf("%s cut at %d", tc.name, c), want, parseChunks(t, splitLimits, fromClients, cutAt(s, c)))
		}
		sameResult(t, tc.name+" byte by byte", want, parseChunks(t, splitLimits, fromClients, byteByByte(s)))
	}
}

func TestScratchBeyondRetainIsReleased(t *testing.T) {
	p, err := NewParser(splitLimits, ServerSide)
	if err != nil {
		t.Fatal(err)
	}
	pkts := clientPackets(t, Version311)
	big := pkts[3] // the 600-byte payload
	if len(big) < 600 {
		t.Fatalf("packet 3 is %d bytes", len(big))
	}
	ping := mustAppend(t, Packet{Type: PINGREQ, Version: Version311})
	for _, chunk := range [][]byte{pkts[0], big[:100], big[100:], ping[:1], ping[1:], ping} {
		if err := p.Feed(chunk); err != nil {
			t.Fatal(err)
		}
		for {
			_, ok, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
	}
	for i, s := range p.scratch {
		if cap(s) > splitLimits.ScratchRetain {
			t.Errorf("scratch %d keeps %d bytes after the big packet, retain is %d", i, cap(s), splitLimits.ScratchRetain)
		}
	}
}

func TestFeedBeforeDrainedIsRefused(t *testing.T) {
	p, _ := NewParser(splitLimits, ServerSide)
	two := append(connectFor(t, Version311), mustAppend(t, Packet{Type: PINGREQ, Version: Version311})...)
	if err := p.Feed(two); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.Next(); !ok || err != nil {
		t.Fatalf("first packet: %v %v", ok, err)
	}
	if err := p.Feed(two); err != ErrUnreadInput {
		t.Fatalf("Feed with unread input: %v", err)
	}
	pkt, ok, err := p.Next()
	if !ok || err != nil || pkt.Type != PINGREQ {
		t.Fatalf("second packet: %s %v %v", pkt.Type, ok, err)
	}
	p.Reset()
	if p.Version() != 0 {
		t.Fatalf("Reset kept version %v", p.Version())
	}
	if err := p.Feed(two); err != nil {
		t.Fatal(err)
	}
	if pkt, _, err := p.Next(); err != nil || pkt.Type != CONNECT {
		t.Fatalf("after Reset: %s %v", pkt.Type, err)
	}
}

// TestAnnouncedSizeIsNotAllocatedUpFront: a header announcing a large
// packet costs memory only as its bytes arrive (found by FuzzParser, which
// ran out of memory when every input announcing 256 MB allocated it).
func TestAnnouncedSizeIsNotAllocatedUpFront(t *testing.T) {
	p, _ := NewParser(DefaultLimits(), ServerSide)
	s := append(connectFor(t, Version311), 0x30, 0xfa, 0xff, 0x3f, 't') // PUBLISH of 1,048,570 bytes
	if err := p.Feed(s); err != nil {
		t.Fatal(err)
	}
	for {
		_, ok, err := p.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	held := 0
	for _, sc := range p.scratch {
		held += cap(sc)
	}
	if held > 4096 || p.Pending() != 5 {
		t.Fatalf("scratch holds %d bytes for a 5-byte partial packet (pending %d)", held, p.Pending())
	}
}
