package serial

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// framerEvents feeds chunks to a framer of max bytes and records what it
// emits: "frame" text or "drop:<reason>".
func framerEvents(limit int, chunks ...[]byte) (events []string, lostPartial bool) {
	f := NewFramer(limit)
	for _, c := range chunks {
		f.Feed(c, func(frame []byte, drop DropReason) {
			if drop != dropNone {
				events = append(events, "drop:"+drop.String())
				return
			}
			events = append(events, string(frame))
		})
	}
	return events, f.Reset()
}

func TestFramer(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		in      string
		want    []string
		partial bool
	}{
		{"one frame", 16, "abc\n", []string{"abc"}, false},
		{"crlf", 16, "abc\r\ndef\r\n", []string{"abc", "def"}, false},
		{"blank lines skipped", 16, "\n\r\n\nabc\n\n", []string{"abc"}, false},
		{"partial kept", 16, "abc\nde", []string{"abc"}, true},
		{"exactly max", 4, "abcd\n", []string{"abcd"}, false},
		{"exactly max with cr", 4, "abcd\r\n", []string{"abcd"}, false},
		{"one over max", 4, "abcde\nok\n", []string{"drop:oversize", "ok"}, false},
		{"oversize with cr", 4, "abcde\r\nok\n", []string{"drop:oversize", "ok"}, false},
		{"oversize not split", 4, "0123456789abcdef\nok\n", []string{"drop:oversize", "ok"}, false},
		{"oversize unterminated", 4, "ok\n0123456789", []string{"ok", "drop:oversize"}, false},
		{"inner cr kept", 16, "a\rb\n", []string{"a\rb"}, false},
		{"only cr", 16, "\r", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			check := func(how string, got []string, partial bool) {
				t.Helper()
				if !slices.Equal(got, tt.want) || partial != tt.partial {
					t.Fatalf("%s: events %q partial %v, want %q partial %v", how, got, partial, tt.want, tt.partial)
				}
			}
			got, partial := framerEvents(tt.limit, in)
			check("whole", got, partial)
			for cut := 0; cut <= len(in); cut++ {
				got, partial := framerEvents(tt.limit, in[:cut], in[cut:])
				check(fmt.Sprintf("cut at %d", cut), got, partial)
			}
			got, partial = framerEvents(tt.limit, byteChunks(in)...)
			check("byte by byte", got, partial)
		})
	}
}

func byteChunks(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

// TestFramerMemoryBounded: an endless line never grows the buffer past max+1.
func TestFramerMemoryBounded(t *testing.T) {
	f := NewFramer(32)
	drops := 0
	chunk := bytes.Repeat([]byte("x"), 1000)
	for range 100 {
		f.Feed(chunk, func(_ []byte, d DropReason) {
			if d == DropOversize {
				drops++
			}
		})
		if cap(f.buf) > 33 {
			t.Fatalf("buffer grew to %d", cap(f.buf))
		}
	}
	if drops != 1 {
		t.Fatalf("one endless line counted %d times, want once", drops)
	}
	var got []string
	f.Feed([]byte("tail\nnext\n"), func(fr []byte, _ DropReason) { got = append(got, string(fr)) })
	if strings.Join(got, ",") != "next" {
		t.Fatalf("after the oversize line: %q, want [next]", got)
	}
}
