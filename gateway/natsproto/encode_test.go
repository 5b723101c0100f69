package natsproto

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestServerEncoders(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nEdgeq-Seq: 1\r\n\r\n")
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"msg", AppendMsg(nil, "foo", "1", "", []byte("hello")), "MSG foo 1 5\r\nhello\r\n"},
		{"msg reply", AppendMsg(nil, "foo", "22", "_INBOX.a", []byte("hi")), "MSG foo 22 _INBOX.a 2\r\nhi\r\n"},
		{"msg empty", AppendMsg(nil, "foo", "1", "", nil), "MSG foo 1 0\r\n\r\n"},
		{"hmsg", AppendHMsg(nil, "telemetry.d", "3", "$EQ.ACK.9", hdr, []byte("x")), "HMSG telemetry.d 3 $EQ.ACK.9 26 27\r\nNATS/1.0\r\nEdgeq-Seq: 1\r\n\r\nx\r\n"},
		{"hmsg no reply no payload", AppendHMsg(nil, "a", "1", "", []byte("NATS/1.0 503\r\n\r\n"), nil), "HMSG a 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"},
		{"ok", AppendOK(nil), "+OK\r\n"},
		{"ping", AppendPing(nil), "PING\r\n"},
		{"pong", AppendPong(nil), "PONG\r\n"},
		{"err", AppendErr(nil, "Unknown Protocol Operation"), "-ERR 'Unknown Protocol Operation'\r\n"},
		{"err keeps one line", AppendErr(nil, "a\r\nb"), "-ERR 'a  b'\r\n"},
		{"appends after existing bytes", AppendPong([]byte("PING\r\n")), "PING\r\nPONG\r\n"},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestClientEncodersRoundTrip(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nK: v\r\n\r\n")
	var stream []byte
	stream = AppendPub(stream, "telemetry.d1", "", []byte("p1"))
	stream = AppendPub(stream, "telemetry.d1", "_INBOX.1", nil)
	stream = AppendHPub(stream, "telemetry.d2", "r", hdr, []byte("p2"))
	stream = AppendHPub(stream, "x", "", hdr, nil)
	stream = AppendSub(stream, "telemetry.>", "workers", "7")
	stream = AppendSub(stream, "foo", "", "8")
	stream = AppendUnsub(stream, "7", 0)
	stream = AppendUnsub(stream, "8", 3)
	want := []string{
		`PUB subject="telemetry.d1" payload="p1"`,
		`PUB subject="telemetry.d1" reply="_INBOX.1" payload=""`,
		`HPUB subject="telemetry.d2" reply="r" header="NATS/1.0\r\nK: v\r\n\r\n" payload="p2"`,
		`HPUB subject="x" header="NATS/1.0\r\nK: v\r\n\r\n" payload=""`,
		`SUB subject="telemetry.>" queue="workers" sid="7"`,
		`SUB subject="foo" sid="8"`,
		`UNSUB sid="7"`,
		`UNSUB sid="8" max=3`,
	}
	sameResult(t, "client encoders", parseResult{ops: want}, parseChunks(t, DefaultLimits(), whole(stream)))
}

func TestAppendInfoDecodesToTheSameInfo(t *testing.T) {
	infos := []Info{
		{},
		{ServerID: "NODE1", ServerName: "gw-kitchen", Version: "2.10.0+edgeq.0.1.0", EdgeqVersion: "0.1.0", Go: "go1.26.8", Host: "127.0.0.1", Port: 4222,
			Headers: true, MaxPayload: 1 << 20, Proto: 1, AuthRequired: true, TLSRequired: true, ClientID: 99, ClientIP: "10.0.0.7"},
		{ServerName: "quote\" backslash\\ nl\n cr\r tab\t nul\x00 del\x7f ctl\x1f uni\u2028\u2029 é 日本"},
	}
	for _, in := range infos {
		out := AppendInfo(nil, &in)
		checkInfoFrame(t, in, out)
	}
}

// checkInfoFrame checks the INFO framing and that the JSON decodes to in.
func checkInfoFrame(t *testing.T, in Info, out []byte) {
	t.Helper()
	s := string(out)
	if !strings.HasPrefix(s, "INFO {") || !strings.HasSuffix(s, "}\r\n") {
		t.Fatalf("bad framing: %q", s)
	}
	body := s[len("INFO ") : len(s)-2]
	for i := 0; i < len(body); i++ {
		if body[i] < ' ' || body[i] == 0x7f {
			t.Fatalf("raw control byte %#x in INFO JSON %q", body[i], body)
		}
	}
	var got Info
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("INFO JSON does not decode: %v: %q", err, body)
	}
	// encoding/json is the reference, invalid UTF-8 handling included.
	ref, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var want Info
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

func TestEncodersDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 1024)
	hdr := []byte("NATS/1.0\r\nEdgeq-Seq: 1\r\n\r\n")
	payload := []byte(`{"t":21.5}`)
	info := Info{ServerID: "N1", Version: "0.1.0", Port: 4222, Headers: true, MaxPayload: 1 << 20, Proto: 1}
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendMsg(buf[:0], "telemetry.d", "1", "r", payload)
		b = AppendHMsg(b, "telemetry.d", "1", "$EQ.ACK.1", hdr, payload)
		b = AppendOK(b)
		b = AppendErr(b, "Slow Consumer")
		b = AppendPing(b)
		b = AppendPong(b)
		b = AppendInfo(b, &info)
		b = AppendPub(b, "a", "", payload)
		_ = AppendHPub(b, "a", "", hdr, payload)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run, want 0", allocs)
	}
}
