package nsqserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

var testLimits = Limits{MaxLine: 1024, MaxMsgSize: 1 << 16, MaxBodySize: 1 << 18}

func body(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }

func mpubBody(msgs ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(msgs)))
	for _, m := range msgs {
		b = append(b, body([]byte(m))...)
	}
	return body(b)
}

// appendCommand encodes a parsed command the way a client sends it.
func appendCommand(dst []byte, c *Command) []byte {
	dst = append(dst, c.Kind.String()...)
	switch c.Kind {
	case CmdSub:
		dst = fmt.Appendf(dst, " %s %s", c.Topic, c.Channel)
	case CmdRdy:
		dst = fmt.Appendf(dst, " %d", c.Count)
	case CmdFin, CmdTouch:
		dst = fmt.Appendf(dst, " %s", c.ID)
	case CmdReq:
		dst = fmt.Appendf(dst, " %s %d", c.ID, c.Delay.Milliseconds())
	case CmdPub, CmdMpub:
		dst = fmt.Appendf(dst, " %s", c.Topic)
	case CmdDpub:
		dst = fmt.Appendf(dst, " %s %d", c.Topic, c.Delay.Milliseconds())
	}
	dst = append(dst, '\n')
	switch c.Kind {
	case CmdIdentify, CmdAuth, CmdPub, CmdDpub:
		dst = append(dst, body(c.Body)...)
	case CmdMpub:
		b := binary.BigEndian.AppendUint32(nil, uint32(len(c.Bodies)))
		for _, m := range c.Bodies {
			b = append(b, body(m)...)
		}
		dst = append(dst, body(b)...)
	}
	return dst
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string // "kind|topic|channel|id|count|delay|body|bodies" or an error prefix "!E_..."
	}{
		{"sub", []byte("SUB telemetry w1\n"), "SUB|telemetry|w1||0|0s||0"},
		{"sub ephemeral", []byte("SUB telemetry w#ephemeral\r\n"), "SUB|telemetry|w#ephemeral||0|0s||0"},
		{"rdy default", []byte("RDY\n"), "RDY||||1|0s||0"},
		{"rdy", []byte("RDY 32\n"), "RDY||||32|0s||0"},
		{"fin", []byte("FIN 0123456789abcdef\n"), "FIN|||0123456789abcdef|0|0s||0"},
		{"req", []byte("REQ 0123456789abcdef 1500\n"), "REQ|||0123456789abcdef|0|1.5s||0"},
		{"touch", []byte("TOUCH 0123456789abcdef\n"), "TOUCH|||0123456789abcdef|0|0s||0"},
		{"nop", []byte("NOP\n"), "NOP||||0|0s||0"},
		{"cls", []byte("CLS\n"), "CLS||||0|0s||0"},
		{"pub", append([]byte("PUB telemetry.d1\n"), body([]byte("hi"))...), "PUB|telemetry.d1|||0|0s|hi|0"},
		{"dpub", append([]byte("DPUB telemetry 100\n"), body([]byte("x"))...), "DPUB|telemetry|||0|100ms|x|0"},
		{"mpub", append([]byte("MPUB telemetry\n"), mpubBody("a", "bc")...), "MPUB|telemetry|||0|0s||2"},
		{"identify", append([]byte("IDENTIFY\n"), body([]byte("{}"))...), "IDENTIFY||||0|0s|{}|0"},
		{"auth", append([]byte("AUTH\n"), body([]byte("tok"))...), "AUTH||||0|0s|tok|0"},
		{"incomplete line", []byte("SUB telem"), ""},
		{"incomplete body", append([]byte("PUB telemetry\n"), 0, 0, 0, 9, 'a'), ""},
		{"unknown", []byte("HELLO\n"), "!E_INVALID invalid command"},
		{"empty line", []byte("\n"), "!E_INVALID invalid command"},
		{"sub short", []byte("SUB telemetry\n"), "!E_INVALID SUB insufficient"},
		{"bad topic", []byte("SUB tele/metry w\n"), "!E_BAD_TOPIC"},
		{"bad channel", []byte("SUB telemetry w*\n"), "!E_BAD_CHANNEL"},
		{"long topic", []byte("PUB " + string(bytes.Repeat([]byte("a"), 65)) + "\n"), "!E_BAD_TOPIC"},
		{"rdy negative", []byte("RDY -1\n"), "!E_INVALID RDY could not parse count"},
		{"fin short id", []byte("FIN 0123\n"), "!E_INVALID invalid message ID"},
		{"req no timeout", []byte("REQ 0123456789abcdef\n"), "!E_INVALID REQ insufficient"},
		{"pub zero body", append([]byte("PUB telemetry\n"), 0, 0, 0, 0), "!E_BAD_MESSAGE PUB invalid body size 0"},
		{"pub too big", append([]byte("PUB telemetry\n"), 0, 1, 0, 1), "!E_BAD_MESSAGE PUB body too big"},
		{"pub negative", append([]byte("PUB telemetry\n"), 0xff, 0, 0, 0), "!E_BAD_MESSAGE PUB invalid body size"},
		{"mpub zero count", append([]byte("MPUB telemetry\n"), body([]byte{0, 0, 0, 0})...), "!E_BAD_BODY MPUB invalid message count 0"},
		{"mpub short", append([]byte("MPUB telemetry\n"), body([]byte{0, 0, 0, 2, 0, 0, 0, 1, 'a'})...), "!E_BAD_MESSAGE MPUB failed to read message(1)"},
		{"mpub trailing", append([]byte("MPUB telemetry\n"), body([]byte{0, 0, 0, 1, 0, 0, 0, 1, 'a', 'b'})...), "!E_BAD_BODY MPUB body has 1 bytes"},
		{"line too long", bytes.Repeat([]byte("a"), 1100), "!E_INVALID command line longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Command
			n, err := ParseCommand(tt.in, testLimits, &c)
			if prefix, isErr := bytes.CutPrefix([]byte(tt.want), []byte("!")); isErr {
				var pe *Error
				if !errors.As(err, &pe) || !bytes.HasPrefix([]byte(pe.Error()), prefix) || !pe.Fatal {
					t.Fatalf("got n=%d err=%v, want fatal %q", n, err, prefix)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if n != 0 {
					t.Fatalf("incomplete input consumed %d", n)
				}
				return
			}
			got := fmt.Sprintf("%s|%s|%s|%s|%d|%v|%s|%d", c.Kind, c.Topic, c.Channel, c.ID, c.Count, c.Delay, c.Body, len(c.Bodies))
			if c.Kind == CmdMpub {
				got = fmt.Sprintf("%s|%s|%s|%s|%d|%v||%d", c.Kind, c.Topic, c.Channel, c.ID, c.Count, c.Delay, len(c.Bodies))
			}
			if got != tt.want || n != len(tt.in) {
				t.Fatalf("got %s (n %d of %d), want %s", got, n, len(tt.in), tt.want)
			}
		})
	}
}

func TestIDRoundTrip(t *testing.T) {
	for _, seq := range []uint64{0, 1, 255, 1 << 40, 1<<64 - 1} {
		id := FormatID(seq)
		got, ok := ParseID(id[:])
		if !ok || got != seq {
			t.Fatalf("%d: %q -> %d %v", seq, id, got, ok)
		}
	}
	if _, ok := ParseID([]byte("0123456789ABCDEF")); ok {
		t.Fatal("upper case accepted")
	}
}

// FuzzParseCommand: any input parses to commands, an incomplete tail, or a
// protocol error, never a panic; a parsed command encodes back to bytes
// that parse to the same command.
func FuzzParseCommand(f *testing.F) {
	f.Add([]byte("SUB telemetry w\nRDY 32\nFIN 0123456789abcdef\n"))
	f.Add(append([]byte("PUB telemetry\n"), body([]byte(`{"device":"d1"}`))...))
	f.Add(append([]byte("MPUB telemetry.d1\n"), mpubBody("a", "b", "c")...))
	f.Add([]byte("REQ 0123456789abcdef 10\nTOUCH 0123456789abcdef\nNOP\nCLS\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var c Command
		for off := 0; off < len(in); {
			n, err := ParseCommand(in[off:], testLimits, &c)
			if err != nil {
				var pe *Error
				if !errors.As(err, &pe) || pe.Code == "" {
					t.Fatalf("not a protocol error: %v", err)
				}
				return
			}
			if n == 0 {
				return
			}
			if n < 0 || off+n > len(in) {
				t.Fatalf("consumed %d of %d", n, len(in)-off)
			}
			off += n
			enc := appendCommand(nil, &c)
			var c2 Command
			m, err := ParseCommand(enc, testLimits, &c2)
			if err != nil || m != len(enc) {
				t.Fatalf("re-parse of %q: %d %v", enc, m, err)
			}
			if !sameCommand(&c, &c2) {
				t.Fatalf("round trip: %+v vs %+v", c, c2)
			}
		}
	})
}

func sameCommand(a, b *Command) bool {
	if a.Kind != b.Kind || !bytes.Equal(a.Topic, b.Topic) || !bytes.Equal(a.Channel, b.Channel) || !bytes.Equal(a.ID, b.ID) ||
		a.Count != b.Count || a.Delay.Milliseconds() != b.Delay.Milliseconds() || !bytes.Equal(a.Body, b.Body) && a.Kind != CmdMpub ||
		len(a.Bodies) != len(b.Bodies) {
		return false
	}
	for i := range a.Bodies {
		if !bytes.Equal(a.Bodies[i], b.Bodies[i]) {
			return false
		}
	}
	return true
}

// BenchmarkParseFin is the consumer's hot command.
func BenchmarkParseFin(b *testing.B) {
	in := []byte("FIN 0123456789abcdef\n")
	var c Command
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCommand(in, testLimits, &c); err != nil {
			b.Fatal(err)
		}
	}
}
