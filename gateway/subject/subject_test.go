package subject

import (
	"strings"
	"testing"
)

func TestSubjectValidation(t *testing.T) {
	tests := []struct {
		subject         string
		publish, filter bool
	}{
		{"foo", true, true},
		{"telemetry.dev-1", true, true},
		{"a.b.c.d", true, true},
		{"$EQ.ACK.1.2", true, true},
		{"_INBOX.x", true, true},
		{"café.ü", true, true},
		{"a*b.c>d", true, true}, // wildcard characters inside a token are literal
		{"*", false, true},
		{">", false, true},
		{"telemetry.>", false, true},
		{"a.*.c", false, true},
		{"*.*", false, true},
		{"a.>.c", false, false}, // '>' only last
		{">.a", false, false},
		{"", false, false},
		{".", false, false},
		{"a.", false, false},
		{".a", false, false},
		{"a..b", false, false},
		{"a b", false, false},
		{"a\tb", false, false},
		{"a\r", false, false},
		{"a\nb", false, false},
		{"a\x00b", false, false},
		{"a\x7fb", false, false},
	}
	for _, tt := range tests {
		if got := ValidPublish(tt.subject); got != tt.publish {
			t.Errorf("ValidPublish(%q) = %v, want %v", tt.subject, got, tt.publish)
		}
		if got := ValidPublish([]byte(tt.subject)); got != tt.publish {
			t.Errorf("ValidPublish([]byte %q) = %v, want %v", tt.subject, got, tt.publish)
		}
		if got := ValidFilter(tt.subject); got != tt.filter {
			t.Errorf("ValidFilter(%q) = %v, want %v", tt.subject, got, tt.filter)
		}
		if err := CheckPublish(tt.subject); (err == nil) != tt.publish || (err != nil && err != ErrInvalidPublish) {
			t.Errorf("CheckPublish(%q) = %v", tt.subject, err)
		}
		if err := CheckFilter([]byte(tt.subject)); (err == nil) != tt.filter || (err != nil && err != ErrInvalidFilter) {
			t.Errorf("CheckFilter(%q) = %v", tt.subject, err)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"foo", "foo.bar", false},
		{"foo.bar", "foo", false},
		{"foo.*", "foo.bar", true},
		{"foo.*", "foo", false},
		{"foo.*", "foo.bar.baz", false},
		{"*.bar", "foo.bar", true},
		{"*.*", "a.b", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"foo.>", "foo.bar", true},
		{"foo.>", "foo.bar.baz", true},
		{"foo.>", "foo", false},
		{"foo.*.>", "foo.a.b", true},
		{"foo.*.>", "foo.a", false},
		{"telemetry.>", "telemetry.dev-1", true},
		{"telemetry.>", "telemetryx.dev-1", false},
		{"foo.ba", "foo.bar", false},
		{"foo.bar", "foo.ba", false},
		{"a*b", "a*b", true}, // literal token
		{"a*b", "axb", false},
		// Invalid input matches nothing.
		{">.a", "x.a", false},
		{"", "", false},
		{"foo..bar", "foo..bar", false},
		{"foo.", "foo.", false},
		{"foo.*", "foo.", false},
		{">", "", false},
		{">", ".a", false},
		{">", "a.", false},
		{"foo.>", "foo.bar..baz", false},
		{"foo.>", "foo.bar.", false},
	}
	for _, tt := range tests {
		if got := Match(tt.filter, tt.subject); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
		if got := Match([]byte(tt.filter), tt.subject); got != tt.want {
			t.Errorf("Match([]byte %q, %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
		if got := Match(tt.filter, []byte(tt.subject)); got != tt.want {
			t.Errorf("Match(%q, []byte %q) = %v, want %v", tt.filter, tt.subject, got, tt.want)
		}
	}
}

// referenceMatch is the obvious, allocating definition Match must agree with.
func referenceMatch(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for _, tok := range append(append([]string{}, f...), s...) {
		if tok == "" {
			return false
		}
	}
	for i, ft := range f {
		if ft == ">" {
			return i == len(f)-1 && len(s) > i
		}
		if i >= len(s) || (ft != "*" && ft != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// referenceValid is the obvious definition of subject validity.
func referenceValid(subject string, wildcards bool) bool {
	toks := strings.Split(subject, ".")
	for i, tok := range toks {
		if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
		if tok == "*" || tok == ">" {
			if !wildcards || (tok == ">" && i != len(toks)-1) {
				return false
			}
		}
	}
	return true
}

func TestSubjectFunctionsDoNotAllocate(t *testing.T) {
	filter, subject := []byte("telemetry.*.>"), "telemetry.dev-1.temp"
	allocs := testing.AllocsPerRun(100, func() {
		if !Match(filter, subject) || !ValidFilter(filter) || !ValidPublish(subject) {
			t.Fatal("unexpected result")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per run, want 0", allocs)
	}
}
