package natsproto

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// opText renders an op canonically, so ops from different parses compare
// with == and nil and empty slices do not differ.
func opText(op Op) string {
	var b strings.Builder
	b.WriteString(op.Kind.String())
	field := func(name string, v []byte) {
		if v != nil {
			fmt.Fprintf(&b, " %s=%q", name, v)
		}
	}
	field("subject", op.Subject)
	field("reply", op.Reply)
	field("queue", op.Queue)
	field("sid", op.SID)
	if op.Max != 0 {
		fmt.Fprintf(&b, " max=%d", op.Max)
	}
	field("header", op.Header)
	if op.Kind == OpPub || op.Kind == OpHPub {
		fmt.Fprintf(&b, " payload=%q", op.Payload)
	}
	field("connect", op.Connect)
	return b.String()
}

// sentinels are the errors a parse can end with.
var sentinels = []error{ErrUnknownOp, ErrControlLineTooLong, ErrPayloadTooBig, ErrBadArgs, ErrPayloadTerminator}

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
	ops     []string
	err     error // sentinel
	pending int   // bytes of an incomplete frame left at the end
}

// parseChunks runs a read loop over chunks the way a server would: each
// chunk is copied into one reused read buffer, ops are rendered only once
// Next asks for more input (so they must survive the rest of the Feed
// cycle), and the read buffer is scribbled over before the next chunk (so
// nothing may point into old input). It also checks that scratch stays
// within the limits after every step.
func parseChunks(t testing.TB, lim Limits, chunks [][]byte) parseResult {
	t.Helper()
	p, err := NewParser(lim)
	if err != nil {
		t.Fatalf("NewParser: %v", err)
	}
	readBuf := make([]byte, 0, 64)
	var res parseResult
	var held []Op
	for _, chunk := range chunks {
		readBuf = append(readBuf[:0], chunk...)
		if err := p.Feed(readBuf); err != nil {
			t.Fatalf("Feed: %v", err)
		}
		for {
			op, ok, err := p.Next()
			checkScratchBounds(t, p)
			if err != nil {
				for _, h := range held {
					res.ops = append(res.ops, opText(h))
				}
				res.err = sentinelOf(err)
				return res
			}
			if !ok {
				break
			}
			checkOpBounds(t, lim, op)
			held = append(held, op)
		}
		for _, h := range held {
			res.ops = append(res.ops, opText(h))
		}
		held = held[:0]
		for i := range readBuf {
			readBuf[i] = 0xAA
		}
	}
	res.pending = p.Pending()
	return res
}

// checkScratchBounds fails when the parser holds more than one frame's worth
// of scratch in either buffer.
func checkScratchBounds(t testing.TB, p *Parser) {
	t.Helper()
	for i, s := range p.scratch {
		if cap(s) > p.lim.maxFrame() {
			t.Fatalf("scratch %d has cap %d > max frame %d", i, cap(s), p.lim.maxFrame())
		}
	}
	if p.Pending() > p.lim.maxFrame() {
		t.Fatalf("pending %d > max frame %d", p.Pending(), p.lim.maxFrame())
	}
}

// checkOpBounds fails when an op carries more than the limits allow.
func checkOpBounds(t testing.TB, lim Limits, op Op) {
	t.Helper()
	if n := len(op.Header) + len(op.Payload); n > lim.MaxPayload {
		t.Fatalf("%s: payload %d bytes > MaxPayload %d", op.Kind, n, lim.MaxPayload)
	}
	for _, f := range [][]byte{op.Subject, op.Reply, op.Queue, op.SID, op.Connect} {
		if len(f) > lim.MaxControlLine {
			t.Fatalf("%s: argument of %d bytes > MaxControlLine %d", op.Kind, len(f), lim.MaxControlLine)
		}
	}
}

// whole is a stream delivered in one read.
func whole(s []byte) [][]byte { return [][]byte{s} }

// cutAt splits s at the given increasing offsets.
func cutAt(s []byte, offsets ...int) [][]byte {
	var chunks [][]byte
	prev := 0
	for _, o := range offsets {
		chunks = append(chunks, s[prev:o])
		prev = o
	}
	return append(chunks, s[prev:])
}

// byteByByte delivers s one byte per read.
func byteByByte(s []byte) [][]byte {
	chunks := make([][]byte, len(s))
	for i := range s {
		chunks[i] = s[i : i+1]
	}
	return chunks
}

// sameResult fails the test when two parses of one stream differ.
func sameResult(t *testing.T, label string, want, got parseResult) {
	t.Helper()
	if want.err != got.err || want.pending != got.pending || len(want.ops) != len(got.ops) {
		t.Fatalf("%s: got %d ops, err %v, pending %d; want %d ops, err %v, pending %d",
			label, len(got.ops), got.err, got.pending, len(want.ops), want.err, want.pending)
	}
	for i := range want.ops {
		if want.ops[i] != got.ops[i] {
			t.Fatalf("%s: op %d = %s, want %s", label, i, got.ops[i], want.ops[i])
		}
	}
}
