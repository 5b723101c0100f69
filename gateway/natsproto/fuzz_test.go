package natsproto

import (
	"errors"
	"testing"
)

// fuzzLimits are small so that random input reaches every limit.
var fuzzLimits = Limits{MaxControlLine: 64, MaxPayload: 256, ScratchRetain: 96}

// chunksFrom cuts data into reads whose lengths are taken from cuts in turn
// (a zero is an empty read); no cuts means one byte per read.
func chunksFrom(data, cuts []byte) [][]byte {
	allZero := true
	for _, c := range cuts {
		allZero = allZero && c == 0
	}
	if allZero {
		return append(byteByByte(data), nil)
	}
	var chunks [][]byte
	for i := 0; len(data) > 0; i++ {
		n := min(int(cuts[i%len(cuts)]), len(data))
		chunks = append(chunks, data[:n])
		data = data[n:]
	}
	return chunks
}

// FuzzParser checks that the parser never panics, stays within its limits
// (checked inside parseChunks), parses a stream cut anywhere exactly as the
// uncut stream, and that every op it accepts re-encodes to a frame that
// parses back to the same op.
func FuzzParser(f *testing.F) {
	for _, fr := range validFrames(f) {
		f.Add(fr, []byte{1, 7, 0, 64})
	}
	for _, tail := range invalidTails {
		f.Add([]byte("PING\r\n"+tail), []byte{5})
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		want := parseChunks(t, fuzzLimits, whole(data))
		sameResult(t, "cut by fuzz input", want, parseChunks(t, fuzzLimits, chunksFrom(data, cuts)))
		if len(data) <= 1024 {
			sameResult(t, "byte by byte", want, parseChunks(t, fuzzLimits, byteByByte(data)))
		}
		checkReencode(t, data)
	})
}

// checkReencode re-encodes each op parsed from data in canonical form and
// parses it again.
func checkReencode(t *testing.T, data []byte) {
	p, err := NewParser(fuzzLimits)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Feed(data); err != nil {
		t.Fatal(err)
	}
	for {
		op, ok, err := p.Next()
		if err != nil || !ok {
			return
		}
		frame := encodeOp(op)
		again := parseChunks(t, fuzzLimits, whole(frame))
		if again.err != nil || len(again.ops) != 1 || again.ops[0] != opText(op) {
			t.Fatalf("op %s re-encoded as %q parses to %+v", opText(op), frame, again)
		}
	}
}

// encodeOp writes op the way a well-behaved client would.
func encodeOp(op Op) []byte {
	switch op.Kind {
	case OpPub:
		return AppendPub(nil, string(op.Subject), string(op.Reply), op.Payload)
	case OpHPub:
		return AppendHPub(nil, string(op.Subject), string(op.Reply), op.Header, op.Payload)
	case OpSub:
		return AppendSub(nil, string(op.Subject), string(op.Queue), string(op.SID))
	case OpUnsub:
		return AppendUnsub(nil, string(op.SID), op.Max)
	case OpConnect:
		return append(append([]byte("CONNECT "), op.Connect...), "\r\n"...)
	case OpPing:
		return []byte("PING\r\n")
	case OpPong:
		return []byte("PONG\r\n")
	}
	return nil
}

// FuzzParseHeader checks that ParseHeader never panics, rejects only with
// its sentinels, respects its limits, and that an accepted block rebuilt
// with the appenders parses to the same status and fields.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{
		"NATS/1.0\r\n\r\n",
		"NATS/1.0 503\r\n\r\n",
		"NATS/1.0 408 Request Timeout\r\nK: v\r\n\r\n",
		"NATS/1.0\r\nEdgeq-Device: d\r\nEdgeq-Seq:  9 \r\nK:\r\n\r\n",
		"NATS/1.0\r\nK: a\rb\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := HeaderLimits{MaxBytes: 512, MaxFields: 8}
	f.Fuzz(func(t *testing.T, block []byte) {
		h, err := ParseHeader(block, lim)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) && !errors.Is(err, ErrHeaderTooBig) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(block) > lim.MaxBytes || h.Len() > lim.MaxFields {
			t.Fatalf("accepted %d bytes, %d fields beyond %+v", len(block), h.Len(), lim)
		}
		rebuilt, err := AppendHeaderStart(nil, h.Status, string(h.Description))
		if err != nil {
			t.Fatalf("status %d %q does not rebuild: %v", h.Status, h.Description, err)
		}
		var keys, values []string
		for k, v := range h.All() {
			keys, values = append(keys, string(k)), append(values, string(v))
			if rebuilt, err = AppendHeaderField(rebuilt, string(k), v); err != nil {
				t.Fatalf("field %q: %q does not rebuild: %v", k, v, err)
			}
		}
		if len(keys) != h.Len() {
			t.Fatalf("All yields %d fields, Len says %d", len(keys), h.Len())
		}
		if len(keys) > 0 {
			if v, ok := h.Get(keys[0]); !ok || string(v) != values[0] {
				t.Fatalf("Get(%q) = %q, want the first value %q", keys[0], v, values[0])
			}
		}
		again, err := ParseHeader(AppendHeaderEnd(rebuilt), HeaderLimits{MaxBytes: 4 * lim.MaxBytes, MaxFields: lim.MaxFields})
		if err != nil {
			t.Fatalf("rebuilt block %q rejected: %v", rebuilt, err)
		}
		if again.Status != h.Status || string(again.Description) != string(h.Description) || again.Len() != h.Len() {
			t.Fatalf("rebuilt block parses to %d %q %d fields", again.Status, again.Description, again.Len())
		}
		i := 0
		for k, v := range again.All() {
			if string(k) != keys[i] || string(v) != values[i] {
				t.Fatalf("rebuilt field %d = %q: %q, want %q: %q", i, k, v, keys[i], values[i])
			}
			i++
		}
	})
}

// FuzzAppendInfo checks INFO framing and JSON escaping on arbitrary strings.
func FuzzAppendInfo(f *testing.F) {
	f.Add("NODE1", "gw \"kitchen\"\n", "10.0.0.1", 4222, int64(1<<20))
	f.Add("\xff\xfe", "\u2028", "", -1, int64(-5))
	f.Fuzz(func(t *testing.T, id, name, ip string, port int, maxPayload int64) {
		in := Info{ServerID: id, ServerName: name, ClientIP: ip, Port: port, MaxPayload: maxPayload, Headers: port%2 == 0}
		checkInfoFrame(t, in, AppendInfo(nil, &in))
	})
}
