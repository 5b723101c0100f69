package natsproto

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// splitLimits are small enough that the stream below crosses ScratchRetain
// and reaches MaxPayload, so scratch growth and release are exercised too.
var splitLimits = Limits{MaxControlLine: 192, MaxPayload: 600, ScratchRetain: 200}

// validFrames holds one of every kind of frame, in the spellings clients use.
func validFrames(t testing.TB) [][]byte {
	hdr := mustHeader(t, 0, "", "Edgeq-Device", "dev-1", "Trace", "a b")
	status := mustHeader(t, 503, "No Responders")
	frames := []string{
		"PING\r\n",
		"pong\n",
		`CONNECT {"verbose":false,"pedantic":false,"name":"w1","lang":"go","version":"1.55.0","protocol":1,"headers":true,"no_responders":true}` + "\r\n",
		"SUB telemetry.> workers 1\r\n",
		"sub\tfoo.*\t2\n",
		"UNSUB 1\r\n",
		"UNSUB 2 10\r\n",
		"PUB telemetry.dev-1 5\r\nhello\r\n",
		"PUB telemetry.dev-1 _INBOX.abc 0\r\n\r\n",
		"PUB a 4\r\n\r\n\r\n\r\n",
		"PUB big " + fmt.Sprint(600) + "\r\n" + strings.Repeat("x", 600) + "\r\n",
		"PUB mid 300\r\n" + strings.Repeat("y", 300) + "\r\n",
		// nats.js's JetStream publish without options: a header block of length 0.
		"HPUB telemetry.dev-4 _INBOX.js.1 0 10\r\n{\"t\":21.5}\r\n",
		"HPUB x 0 0\r\n\r\n",
	}
	out := make([][]byte, 0, len(frames)+3)
	for _, f := range frames {
		out = append(out, []byte(f))
	}
	out = append(out,
		AppendHPub(nil, "telemetry.dev-2", "$EQ.ACK.1", hdr, []byte(`{"t":21.5}`)),
		AppendHPub(nil, "telemetry.dev-3", "", hdr, nil),
		AppendHPub(nil, "x", "", status, nil),
	)
	return out
}

func mustHeader(t testing.TB, status int, desc string, kv ...string) []byte {
	t.Helper()
	b, err := AppendHeaderStart(nil, status, desc)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if b, err = AppendHeaderField(b, kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return AppendHeaderEnd(b)
}

// invalidTails end a stream in each kind of error, to check that a cut
// stream fails the same way, after the same ops.
var invalidTails = []string{
	"BOGUS\r\n",
	"PUB foo 3\r\nabcd\r\n",
	"PUB foo 601\r\n",
	"HPUB foo 9 3\r\n",
	"SUB " + strings.Repeat("s", 250) + " 1\r\n",
	"PUB " + strings.Repeat("s", 250),
	"PUB foo 3\r\nabc",
}

func longStream(t testing.TB) []byte {
	var s []byte
	for round := 0; round < 3; round++ {
		for _, f := range validFrames(t) {
			s = append(s, f...)
		}
	}
	return s
}

func TestEveryFrameSplitAtEveryOffset(t *testing.T) {
	for _, f := range validFrames(t) {
		want := parseChunks(t, splitLimits, whole(f))
		if want.err != nil || len(want.ops) != 1 || want.pending != 0 {
			t.Fatalf("%q does not parse to one op: %+v", f, want)
		}
		for i := 0; i <= len(f); i++ {
			sameResult(t, fmt.Sprintf("%.20q cut at %d", f, i), want, parseChunks(t, splitLimits, cutAt(f, i)))
		}
		sameResult(t, fmt.Sprintf("%.20q byte by byte", f), want, parseChunks(t, splitLimits, byteByByte(f)))
	}
}

func TestShortFramesCutTwiceAtEveryPair(t *testing.T) {
	for _, f := range validFrames(t) {
		if len(f) > 200 {
			continue // the pairs of the long frames add nothing but time
		}
		want := parseChunks(t, splitLimits, whole(f))
		for i := 0; i <= len(f); i++ {
			for j := i; j <= len(f); j++ {
				sameResult(t, fmt.Sprintf("%.20q cut at %d,%d", f, i, j), want, parseChunks(t, splitLimits, cutAt(f, i, j)))
			}
		}
	}
}

func TestLongStreamSplitAtEveryOffset(t *testing.T) {
	stream := longStream(t)
	want := parseChunks(t, splitLimits, whole(stream))
	if want.err != nil || len(want.ops) != 3*len(validFrames(t)) {
		t.Fatalf("whole stream: %d ops, err %v", len(want.ops), want.err)
	}
	for i := 0; i <= len(stream); i++ {
		sameResult(t, fmt.Sprintf("cut at %d", i), want, parseChunks(t, splitLimits, cutAt(stream, i)))
	}
	sameResult(t, "byte by byte", want, parseChunks(t, splitLimits, byteByByte(stream)))

	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var chunks [][]byte
		for rest := stream; len(rest) > 0; {
			n := min(rng.IntN(700), len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		sameResult(t, fmt.Sprintf("random chunks, round %d", round), want, parseChunks(t, splitLimits, chunks))
	}
}

func TestFailingStreamsSplitAtEveryOffset(t *testing.T) {
	prefix := bytes.Join(validFrames(t)[:4], nil)
	for _, tail := range invalidTails {
		stream := append(append([]byte{}, prefix...), tail...)
		want := parseChunks(t, splitLimits, whole(stream))
		if len(want.ops) != 4 {
			t.Fatalf("%q: %d ops before the tail, want 4", tail, len(want.ops))
		}
		for i := 0; i <= len(stream); i++ {
			sameResult(t, fmt.Sprintf("%.20q cut at %d", tail, i), want, parseChunks(t, splitLimits, cutAt(stream, i)))
		}
		sameResult(t, fmt.Sprintf("%.20q byte by byte", tail), want, parseChunks(t, splitLimits, byteByByte(stream)))
	}
}

func TestScratchBeyondRetainIsReleased(t *testing.T) {
	p, err := NewParser(splitLimits)
	if err != nil {
		t.Fatal(err)
	}
	big := []byte("PUB big 600\r\n" + strings.Repeat("x", 600) + "\r\n")
	for _, chunk := range [][]byte{big[:100], big[100:], []byte("PING\r\n"), []byte("PO"), []byte("NG\r\n")} {
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
			t.Errorf("scratch %d keeps %d bytes after the big frame, retain is %d", i, cap(s), splitLimits.ScratchRetain)
		}
	}
}

// TestEmptyHeaderBlockSplitAtEveryOffset: nats.js publishes to JetStream
// without options as "HPUB subj reply 0 N". Cut anywhere, it parses to an
// HPUB with no header block (Header nil), as nats-server takes it, between
// two ordinary frames.
func TestEmptyHeaderBlockSplitAtEveryOffset(t *testing.T) {
	stream := []byte("PING\r\nHPUB telemetry.js-1 _INBOX.Qx.7 0 10\r\n{\"t\":21.5}\r\nHPUB x 0 0\r\n\r\nPONG\r\n")
	want := parseResult{ops: []string{
		"PING",
		`HPUB subject="telemetry.js-1" reply="_INBOX.Qx.7" payload="{\"t\":21.5}"`,
		`HPUB subject="x" payload=""`,
		"PONG",
	}}
	for i := 0; i <= len(stream); i++ {
		for j := i; j <= len(stream); j++ {
			sameResult(t, fmt.Sprintf("cut at %d,%d", i, j), want, parseChunks(t, splitLimits, cutAt(stream, i, j)))
		}
	}
	sameResult(t, "byte by byte", want, parseChunks(t, splitLimits, byteByByte(stream)))
}
