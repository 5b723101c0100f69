package natsproto

import (
	"errors"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	type field struct{ k, v string }
	tests := []struct {
		name   string
		block  string
		status int
		desc   string
		fields []field
	}{
		{"empty", "NATS/1.0\r\n\r\n", 0, "", nil},
		{"fields", "NATS/1.0\r\nEdgeq-Device: dev-1\r\nEdgeq-Seq: 42\r\n\r\n", 0, "", []field{{"Edgeq-Device", "dev-1"}, {"Edgeq-Seq", "42"}}},
		{"no responders", "NATS/1.0 503\r\n\r\n", 503, "", nil},
		{"status with description", "NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout", nil},
		{"status tab and trailing blanks", "NATS/1.0\t404  No Messages \r\n\r\n", 404, "No Messages", nil},
		{"blanks after version only", "NATS/1.0  \r\n\r\n", 0, "", nil},
		{"value trimmed, inner blanks kept", "NATS/1.0\r\nK:  a b \t\r\n\r\n", 0, "", []field{{"K", "a b"}}},
		{"empty value", "NATS/1.0\r\nK:\r\n\r\n", 0, "", []field{{"K", ""}}},
		{"colon in value", "NATS/1.0\r\nK: a:b\r\n\r\n", 0, "", []field{{"K", "a:b"}}},
		{"repeated key", "NATS/1.0\r\nK: 1\r\nK: 2\r\n\r\n", 0, "", []field{{"K", "1"}, {"K", "2"}}},
		{"utf-8 value", "NATS/1.0\r\nK: çà\r\n\r\n", 0, "", []field{{"K", "çà"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader([]byte(tt.block), DefaultHeaderLimits())
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != tt.status || string(h.Description) != tt.desc {
				t.Fatalf("status %d %q, want %d %q", h.Status, h.Description, tt.status, tt.desc)
			}
			var got []field
			for k, v := range h.All() {
				got = append(got, field{string(k), string(v)})
			}
			if len(got) != len(tt.fields) || h.Len() != len(tt.fields) {
				t.Fatalf("fields %v (Len %d), want %v", got, h.Len(), tt.fields)
			}
			for i := range got {
				if got[i] != tt.fields[i] {
					t.Fatalf("field %d = %v, want %v", i, got[i], tt.fields[i])
				}
			}
			if len(tt.fields) > 0 {
				v, ok := h.Get(tt.fields[0].k)
				if !ok || string(v) != tt.fields[0].v {
					t.Fatalf("Get(%q) = %q %v, want the first value %q", tt.fields[0].k, v, ok, tt.fields[0].v)
				}
			}
		})
	}
}

func TestParseHeaderRejects(t *testing.T) {
	tight := HeaderLimits{MaxBytes: 40, MaxFields: 2}
	tests := []struct {
		name  string
		block string
		lim   HeaderLimits
		want  error
	}{
		{"empty", "", DefaultHeaderLimits(), ErrBadHeader},
		{"wrong version", "NATS/2.0\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"http", "HTTP/1.1 200 OK\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"junk glued to version", "NATS/1.0x\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"no final empty line", "NATS/1.0\r\nK: v\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"version line only", "NATS/1.0\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"bare LF endings", "NATS/1.0\n\n", DefaultHeaderLimits(), ErrBadHeader},
		{"bytes after the end", "NATS/1.0\r\n\r\nbody", DefaultHeaderLimits(), ErrBadHeader},
		{"two-digit status", "NATS/1.0 50\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"four-digit status", "NATS/1.0 5030\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"status not digits", "NATS/1.0 abc\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"status below 100", "NATS/1.0 099 x\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"control byte in description", "NATS/1.0 503 a\x01\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"field without colon", "NATS/1.0\r\nKv\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"empty key", "NATS/1.0\r\n: v\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"space in key", "NATS/1.0\r\nK k: v\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"folded continuation line", "NATS/1.0\r\nK: v\r\n  more\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"bare CR in value", "NATS/1.0\r\nK: a\rb\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"bare LF in value", "NATS/1.0\r\nK: a\nb\r\n\r\n", DefaultHeaderLimits(), ErrBadHeader},
		{"too many bytes", "NATS/1.0\r\nK: " + strings.Repeat("v", 40) + "\r\n\r\n", tight, ErrHeaderTooBig},
		{"too many fields", "NATS/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", tight, ErrHeaderTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseHeader([]byte(tt.block), tt.lim); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestHeaderGetIsCaseSensitiveAndReportsAbsence(t *testing.T) {
	h, err := ParseHeader([]byte("NATS/1.0\r\nEdgeq-Seq: 7\r\n\r\n"), DefaultHeaderLimits())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := h.Get("edgeq-seq"); ok {
		t.Fatalf("Get with other case = %q, want absent", v)
	}
	if _, ok := h.Get("Missing"); ok {
		t.Fatal("Get of a missing key reports present")
	}
}

func TestAppendHeader(t *testing.T) {
	b, err := AppendHeaderStart(nil, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, err = AppendHeaderField(b, "Edgeq-Device", "dev-1"); err != nil {
		t.Fatal(err)
	}
	if b, err = AppendHeaderField(b, "Edgeq-Source", []byte("mqtt")); err != nil {
		t.Fatal(err)
	}
	if b, err = AppendHeaderInt(b, "Edgeq-Seq", -3); err != nil {
		t.Fatal(err)
	}
	b = AppendHeaderEnd(b)
	want := "NATS/1.0\r\nEdgeq-Device: dev-1\r\nEdgeq-Source: mqtt\r\nEdgeq-Seq: -3\r\n\r\n"
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	status, err := AppendHeaderStart(nil, 503, "No Responders")
	if err != nil || string(status) != "NATS/1.0 503 No Responders\r\n" {
		t.Fatalf("status line %q, %v", status, err)
	}
}

func TestAppendHeaderRejectsAndLeavesDstAlone(t *testing.T) {
	start := []byte("NATS/1.0\r\n")
	tests := []struct {
		name   string
		append func([]byte) ([]byte, error)
	}{
		{"status 99", func(b []byte) ([]byte, error) { return AppendHeaderStart(b, 99, "") }},
		{"status 1000", func(b []byte) ([]byte, error) { return AppendHeaderStart(b, 1000, "") }},
		{"description without status", func(b []byte) ([]byte, error) { return AppendHeaderStart(b, 0, "x") }},
		{"CRLF in description", func(b []byte) ([]byte, error) { return AppendHeaderStart(b, 503, "a\r\nK: v") }},
		{"empty key", func(b []byte) ([]byte, error) { return AppendHeaderField(b, "", "v") }},
		{"colon in key", func(b []byte) ([]byte, error) { return AppendHeaderField(b, "a:b", "v") }},
		{"space in key", func(b []byte) ([]byte, error) { return AppendHeaderField(b, "a b", "v") }},
		{"CRLF in value", func(b []byte) ([]byte, error) { return AppendHeaderField(b, "K", "v\r\nInjected: 1") }},
		{"NUL in value", func(b []byte) ([]byte, error) { return AppendHeaderField(b, "K", []byte{'a', 0}) }},
		{"bad key for int", func(b []byte) ([]byte, error) { return AppendHeaderInt(b, "K\n", 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.append(start)
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v, want ErrBadHeader", err)
			}
			if string(got) != string(start) {
				t.Fatalf("dst changed to %q", got)
			}
		})
	}
}

func TestHeaderCodecDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		b, _ := AppendHeaderStart(buf[:0], 0, "")
		b, _ = AppendHeaderField(b, "Edgeq-Device", "dev-1")
		b, _ = AppendHeaderInt(b, "Edgeq-Seq", 42)
		b = AppendHeaderEnd(b)
		h, err := ParseHeader(b, DefaultHeaderLimits())
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := h.Get("Edgeq-Seq"); !ok || string(v) != "42" {
			t.Fatal("lost Edgeq-Seq")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run, want 0", allocs)
	}
}
