package natsproto

import (
	"errors"
	"strings"
	"testing"
)

func TestParserOps(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"ping", "PING\r\n", []string{"PING"}},
		{"ping lower case bare LF", "ping\n", []string{"PING"}},
		{"ping mixed case trailing blanks", "PiNg \t\r\n", []string{"PING"}},
		{"pong", "PONG\r\n", []string{"PONG"}},
		{"connect", `CONNECT {"verbose":false}` + "\r\n", []string{`CONNECT connect="{\"verbose\":false}"`}},
		{"connect tab and trailing blanks", "connect\t{} \t\r\n", []string{`CONNECT connect="{}"`}},
		{"connect keeps inner spaces", `CONNECT {"name": "a b"}` + "\r\n", []string{`CONNECT connect="{\"name\": \"a b\"}"`}},
		{"pub", "PUB foo 5\r\nhello\r\n", []string{`PUB subject="foo" payload="hello"`}},
		{"pub reply empty payload", "pub foo bar 0\r\n\r\n", []string{`PUB subject="foo" reply="bar" payload=""`}},
		{"pub tabs and runs of blanks", "PUB\tfoo\t\tbar  3 \r\nabc\r\n", []string{`PUB subject="foo" reply="bar" payload="abc"`}},
		{"pub bare LF on control line", "PUB foo 3\nabc\r\n", []string{`PUB subject="foo" payload="abc"`}},
		{"pub payload holding CRLF and verbs", "PUB a 11\r\nPING\r\nSUB x\r\n", []string{`PUB subject="a" payload="PING\r\nSUB x"`}},
		{"pub binary payload", "PUB a 3\r\n\x00\xff\n\r\n", []string{`PUB subject="a" payload="\x00\xff\n"`}},
		{"hpub", "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", []string{`HPUB subject="foo" header="NATS/1.0\r\n\r\n" payload="hi"`}},
		{"hpub reply empty payload", "hpub foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n", []string{`HPUB subject="foo" reply="r" header="NATS/1.0\r\n\r\n" payload=""`}},
		// A header size of 0 is no headers, as in nats-server: Header stays nil.
		{"hpub zero header", "HPUB foo 0 2\r\nhi\r\n", []string{`HPUB subject="foo" payload="hi"`}},
		{"hpub zero header as nats.js publishes to JetStream", "HPUB telemetry.d1 _INBOX.abc.1 0 5\r\nhello\r\n",
			[]string{`HPUB subject="telemetry.d1" reply="_INBOX.abc.1" payload="hello"`}},
		{"hpub zero header empty payload", "HPUB foo 0 0\r\n\r\n", []string{`HPUB subject="foo" payload=""`}},
		{"sub", "SUB foo 1\r\n", []string{`SUB subject="foo" sid="1"`}},
		{"sub queue", "sub telemetry.> workers 22\n", []string{`SUB subject="telemetry.>" queue="workers" sid="22"`}},
		{"unsub", "UNSUB 1\r\n", []string{`UNSUB sid="1"`}},
		{"unsub max", "unsub 1 5\r\n", []string{`UNSUB sid="1" max=5`}},
		{"unsub max zero is none", "UNSUB 1 0\r\n", []string{`UNSUB sid="1"`}},
		{"several ops in one read", "PING\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPONG\r\n", []string{
			"PING", `SUB subject="a" sid="1"`, `PUB subject="a" payload="x"`, "PONG",
		}},
		{"empty input", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseChunks(t, DefaultLimits(), whole([]byte(tt.in)))
			sameResult(t, tt.name, parseResult{ops: tt.want}, got)
		})
	}
}

func TestParserErrors(t *testing.T) {
	small := Limits{MaxControlLine: 32, MaxPayload: 16, ScratchRetain: 64}
	tests := []struct {
		name    string
		lim     Limits
		in      string
		wantOps []string
		want    error
	}{
		{"unknown verb", DefaultLimits(), "FOO\r\n", nil, ErrUnknownOp},
		{"empty line", DefaultLimits(), "\r\n", nil, ErrUnknownOp},
		{"leading blank", DefaultLimits(), " PING\r\n", nil, ErrUnknownOp},
		{"verb with junk", DefaultLimits(), "PINGX\r\n", nil, ErrUnknownOp},
		{"server-only verb", DefaultLimits(), "MSG foo 1 1\r\nx\r\n", nil, ErrUnknownOp},
		{"http request, no line end needed", DefaultLimits(), "GET /", nil, ErrUnknownOp},
		{"ops before the error are kept", DefaultLimits(), "PING\r\nSUB a 1\r\nNOPE\r\n", []string{"PING", `SUB subject="a" sid="1"`}, ErrUnknownOp},
		{"ping with argument", DefaultLimits(), "PING x\r\n", nil, ErrBadArgs},
		{"pub without args", DefaultLimits(), "PUB\r\n", nil, ErrBadArgs},
		{"pub without size", DefaultLimits(), "PUB foo\r\n", nil, ErrBadArgs},
		{"pub too many args", DefaultLimits(), "PUB foo bar baz 3\r\n", nil, ErrBadArgs},
		{"pub negative size", DefaultLimits(), "PUB foo -1\r\n", nil, ErrBadArgs},
		{"pub plus sign", DefaultLimits(), "PUB foo +1\r\n", nil, ErrBadArgs},
		{"pub size not a number", DefaultLimits(), "PUB foo 1x\r\n", nil, ErrBadArgs},
		{"pub size overflows", DefaultLimits(), "PUB foo 99999999999999999999\r\n", nil, ErrBadArgs},
		{"pub over max payload", DefaultLimits(), "PUB foo 1048577\r\n", nil, ErrPayloadTooBig},
		{"pub at max payload is fine, body missing", small, "PUB foo 16\r\n", nil, nil},
		{"pub over small max payload", small, "PUB foo 17\r\n", nil, ErrPayloadTooBig},
		{"hpub header larger than total", DefaultLimits(), "HPUB foo 5 3\r\n", nil, ErrBadArgs},
		{"hpub missing total", DefaultLimits(), "HPUB foo 3\r\n", nil, ErrBadArgs},
		{"hpub too many args", DefaultLimits(), "HPUB a b c 1 2\r\n", nil, ErrBadArgs},
		{"hpub over max payload", small, "HPUB foo 1 17\r\n", nil, ErrPayloadTooBig},
		{"sub without sid", DefaultLimits(), "SUB foo\r\n", nil, ErrBadArgs},
		{"sub too many args", DefaultLimits(), "SUB a b c d\r\n", nil, ErrBadArgs},
		{"unsub without sid", DefaultLimits(), "UNSUB\r\n", nil, ErrBadArgs},
		{"unsub bad max", DefaultLimits(), "UNSUB 1 x\r\n", nil, ErrBadArgs},
		{"unsub too many args", DefaultLimits(), "UNSUB 1 2 3\r\n", nil, ErrBadArgs},
		{"connect without json", DefaultLimits(), "CONNECT \t\r\n", nil, ErrBadArgs},
		{"payload longer than announced", DefaultLimits(), "PUB foo 3\r\nabcd\r\n", nil, ErrPayloadTerminator},
		{"payload ends in bare LF", DefaultLimits(), "PUB foo 3\r\nabc\nPING\r\n", nil, ErrPayloadTerminator},
		{"line of exactly max is fine", small, "SUB " + strings.Repeat("a", 26) + " 1\r\n", []string{`SUB subject="` + strings.Repeat("a", 26) + `" sid="1"`}, nil},
		{"line one over max", small, "SUB " + strings.Repeat("a", 27) + " 1\r\n", nil, ErrControlLineTooLong},
		{"line one over max with bare LF", small, "SUB " + strings.Repeat("a", 27) + " 1\n", nil, ErrControlLineTooLong},
		{"unterminated overlong line, no LF needed", small, "PUB " + strings.Repeat("a", 40), nil, ErrControlLineTooLong},
		{"unknown verb wins over length", small, strings.Repeat("x", 40), nil, ErrUnknownOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseChunks(t, tt.lim, whole([]byte(tt.in)))
			if got.err != tt.want {
				t.Fatalf("error %v, want %v", got.err, tt.want)
			}
			sameResult(t, tt.name, parseResult{ops: tt.wantOps, err: tt.want, pending: got.pending}, got)
		})
	}
}

func TestParserErrorIsStickyUntilReset(t *testing.T) {
	p, err := NewParser(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Feed([]byte("PING\r\nBOGUS\r\nPONG\r\n")); err != nil {
		t.Fatal(err)
	}
	if op, ok, err := p.Next(); !ok || err != nil || op.Kind != OpPing {
		t.Fatalf("first op = %v %v %v, want PING", op.Kind, ok, err)
	}
	_, _, first := p.Next()
	if !errors.Is(first, ErrUnknownOp) {
		t.Fatalf("second Next error = %v, want ErrUnknownOp", first)
	}
	// The PONG after the bad line is never returned: framing is lost.
	for range 3 {
		if op, ok, err := p.Next(); ok || err != first {
			t.Fatalf("Next after error = %v %v %v, want the same error", op.Kind, ok, err)
		}
	}
	if err := p.Feed([]byte("PING\r\n")); err != first {
		t.Fatalf("Feed after error = %v, want the same error", err)
	}
	p.Reset()
	if err := p.Feed([]byte("PING\r\n")); err != nil {
		t.Fatalf("Feed after Reset: %v", err)
	}
	if op, ok, err := p.Next(); !ok || err != nil || op.Kind != OpPing {
		t.Fatalf("after Reset = %v %v %v, want PING", op.Kind, ok, err)
	}
}

func TestParserResetDropsPendingFrame(t *testing.T) {
	p, err := NewParser(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Feed([]byte("PUB foo 10\r\nabc")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := p.Next(); ok || err != nil {
		t.Fatalf("Next = %v %v, want need more", ok, err)
	}
	if p.Pending() != len("PUB foo 10\r\nabc") {
		t.Fatalf("Pending = %d", p.Pending())
	}
	p.Reset()
	if p.Pending() != 0 {
		t.Fatalf("Pending after Reset = %d, want 0", p.Pending())
	}
	if err := p.Feed([]byte("PONG\r\n")); err != nil {
		t.Fatal(err)
	}
	if op, ok, err := p.Next(); !ok || err != nil || op.Kind != OpPong {
		t.Fatalf("after Reset = %v %v %v, want PONG", op.Kind, ok, err)
	}
}

func TestFeedBeforeDrainedIsRefused(t *testing.T) {
	p, err := NewParser(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Feed([]byte("PING\r\nPONG\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.Next(); !ok {
		t.Fatal("want PING")
	}
	if err := p.Feed([]byte("SUB a 1\r\n")); !errors.Is(err, ErrUnreadInput) {
		t.Fatalf("Feed with unread input = %v, want ErrUnreadInput", err)
	}
	// The refused Feed changed nothing: PONG is still next.
	if op, ok, err := p.Next(); !ok || err != nil || op.Kind != OpPong {
		t.Fatalf("after refused Feed = %v %v %v, want PONG", op.Kind, ok, err)
	}
}

func TestOpsStayValidUntilNextFeed(t *testing.T) {
	// The second read completes a frame held in scratch, then ends in a new
	// partial frame that must not overwrite it.
	reads := []string{"PUB first 5\r\nab", "cde\r\nSUB s 1\r\nPUB second 5\r\nxy", "zzz\r\n"}
	want := [][]string{
		nil,
		{`PUB subject="first" payload="abcde"`, `SUB subject="s" sid="1"`},
		{`PUB subject="second" payload="xyzzz"`},
	}
	p, err := NewParser(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i, r := range reads {
		n := copy(buf, r)
		if err := p.Feed(buf[:n]); err != nil {
			t.Fatal(err)
		}
		var ops []Op
		for {
			op, ok, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			ops = append(ops, op)
		}
		if len(ops) != len(want[i]) {
			t.Fatalf("read %d: %d ops, want %d", i, len(ops), len(want[i]))
		}
		for j, op := range ops {
			if got := opText(op); got != want[i][j] {
				t.Fatalf("read %d op %d = %s, want %s", i, j, got, want[i][j])
			}
		}
		for j := range buf {
			buf[j] = '#'
		}
	}
}

func TestOpSlicesCannotOverwriteStream(t *testing.T) {
	p, err := NewParser(DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	in := []byte("PUB a 1\r\nx\r\nPING\r\n")
	if err := p.Feed(in); err != nil {
		t.Fatal(err)
	}
	op, _, _ := p.Next()
	_ = append(op.Subject, "ZZZZ"...)
	_ = append(op.Payload, "ZZZZ"...)
	if op, ok, err := p.Next(); !ok || err != nil || op.Kind != OpPing {
		t.Fatalf("after appending to op slices: %v %v %v, want PING", op.Kind, ok, err)
	}
}

func TestNewParserRejectsBadLimits(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
	}{
		{"zero value", Limits{}},
		{"control line too small", Limits{MaxControlLine: 31, MaxPayload: 1}},
		{"control line too large", Limits{MaxControlLine: maxControlLine + 1, MaxPayload: 1}},
		{"negative payload", Limits{MaxControlLine: 64, MaxPayload: -1}},
		{"payload too large", Limits{MaxControlLine: 64, MaxPayload: maxPayloadCap + 1}},
		{"negative retain", Limits{MaxControlLine: 64, MaxPayload: 1, ScratchRetain: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := NewParser(tt.lim); err == nil || p != nil {
				t.Fatalf("NewParser(%+v) = %v, %v; want an error", tt.lim, p, err)
			}
		})
	}
	if _, err := NewParser(DefaultLimits()); err != nil {
		t.Fatalf("default limits rejected: %v", err)
	}
}

func TestOpKindString(t *testing.T) {
	for k, want := range map[OpKind]string{OpConnect: "CONNECT", OpHPub: "HPUB", OpUnsub: "UNSUB", 0: "OpKind(?)", 200: "OpKind(?)"} {
		if got := k.String(); got != want {
			t.Errorf("OpKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
