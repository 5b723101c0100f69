// Package secret holds credentials (passwords, tokens, shared secrets,
// Authorization headers) so that no printer shows them: fmt with any verb,
// log/slog, encoding/json, YAML and errors that format them all see
// Redacted. The value reads from YAML, JSON and the environment as a plain
// string; code that needs it calls Reveal, which is easy to grep for.
package secret

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
)

// Redacted is what a set secret prints as. Config loading refuses it as a
// value, so a printed configuration fed back as a file fails loudly
// instead of running with "<hidden>" as the password.
const Redacted = "<hidden>"

// String is a credential. The zero value is "not set" and prints as "".
type String string

// Reveal returns the credential itself, for the code that uses it.
func (s String) Reveal() string { return string(s) }

// IsSet reports whether the secret is not empty.
func (s String) IsSet() bool { return s != "" }

// Len is the length of the credential in bytes (for length rules).
func (s String) Len() int { return len(s) }

// String returns Redacted, or "" for an unset secret.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v redacted.
func (s String) GoString() string { return strconv.Quote(s.String()) }

// Format redacts under every verb (%s, %v, %q, %x, %d ...), which
// String alone does not: fmt prints the raw value for a verb it finds bad.
func (s String) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		io.WriteString(f, strconv.Quote(s.String()))
	default:
		if verb == 'v' && f.Flag('#') {
			io.WriteString(f, s.GoString())
			return
		}
		io.WriteString(f, s.String())
	}
}

// LogValue keeps slog output redacted.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes the redacted form.
func (s String) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText writes the redacted form (slog's text handler, map keys).
func (s String) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML writes the redacted form.
func (s String) MarshalYAML() (any, error) { return s.String(), nil }

// URLUserinfo reports whether raw, a URL such as nats://u:p@host:4222,
// carries user information (a user, a password or a token) before its
// host.
func URLUserinfo(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Contains(rest, "@")
}

// RedactURL replaces the user information of a URL with Redacted, so that
// the URL can be printed: "nats://tok@h:4222" → "nats://<hidden>@h:4222".
// It works on text that does not parse as a URL, too.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	out := Redacted + rest[at:]
	if ok {
		out = scheme + "://" + out
	}
	return out
}
