package natsproto

import (
	"bytes"
	"fmt"
	"iter"
)

// headerVersion starts every header block.
const headerVersion = "NATS/1.0"

// HeaderLimits bound the header blocks ParseHeader accepts.
type HeaderLimits struct {
	// MaxBytes is the largest block, in bytes, line endings included.
	// Default 64 KiB; HPUB also bounds it by Limits.MaxPayload.
	MaxBytes int
	// MaxFields is the most "Key: Value" lines. Default 128.
	MaxFields int
}

// DefaultHeaderLimits returns the default header limits.
func DefaultHeaderLimits() HeaderLimits {
	return HeaderLimits{MaxBytes: 64 << 10, MaxFields: 128}
}

// Header is a validated, read-only view of a header block:
//
//	NATS/1.0[ <3-digit status>[ <description>]]\r\n
//	Key: Value\r\n   (zero or more)
//	\r\n
//
// It points into the block it was parsed from and allocates nothing. Keys
// are compared case-sensitively, as nats.go and nats-server do. Values have
// surrounding spaces and tabs trimmed; a key may repeat.
type Header struct {
	// Status is the status code of the first line (503 for no responders),
	// 0 when there is none.
	Status int
	// Description is the text after the status code, e.g. "No Responders".
	Description []byte

	fields []byte // the field lines, each ending in CRLF
	count  int
}

// ParseHeader validates block and returns a view of it. The block must be
// exactly one header block, as in Op.Header: nothing may follow the empty
// line that ends it.
func ParseHeader(block []byte, lim HeaderLimits) (Header, error) {
	var h Header
	if len(block) > lim.MaxBytes {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrHeaderTooBig, len(block), lim.MaxBytes)
	}
	first, rest, ok := cutLine(block)
	if !ok {
		return h, fmt.Errorf("%w: no CRLF after the version line", ErrBadHeader)
	}
	if err := h.parseStatusLine(first); err != nil {
		return h, err
	}
	h.fields = rest
	for {
		line, after, ok := cutLine(rest)
		if !ok {
			return Header{}, fmt.Errorf("%w: missing CRLF or final empty line", ErrBadHeader)
		}
		if len(line) == 0 {
			if len(after) != 0 {
				return Header{}, fmt.Errorf("%w: %d bytes after the final empty line", ErrBadHeader, len(after))
			}
			h.fields = h.fields[:len(h.fields)-len(rest)]
			return h, nil
		}
		if _, _, err := splitField(line); err != nil {
			return Header{}, err
		}
		if h.count++; h.count > lim.MaxFields {
			return Header{}, fmt.Errorf("%w: more than %d fields", ErrHeaderTooBig, lim.MaxFields)
		}
		rest = after
	}
}

// parseStatusLine parses "NATS/1.0", optionally followed by a status code
// and a description, separated by spaces or tabs.
func (h *Header) parseStatusLine(line []byte) error {
	rest, ok := bytes.CutPrefix(line, []byte(headerVersion))
	if !ok {
		return fmt.Errorf("%w: block does not start with %s", ErrBadHeader, headerVersion)
	}
	if len(rest) == 0 {
		return nil
	}
	if !isSeparator(rest[0]) {
		return fmt.Errorf("%w: junk after %s", ErrBadHeader, headerVersion)
	}
	rest = trimSeparators(rest)
	if len(rest) == 0 {
		return nil
	}
	if len(rest) < 3 || !isDigits(rest[:3]) || rest[0] == '0' || (len(rest) > 3 && !isSeparator(rest[3])) {
		return fmt.Errorf("%w: status is not 3 digits from 100 to 999", ErrBadHeader)
	}
	h.Status = int(rest[0]-'0')*100 + int(rest[1]-'0')*10 + int(rest[2]-'0')
	if desc := trimSeparators(rest[3:]); len(desc) > 0 {
		if !validHeaderValue(desc) {
			return fmt.Errorf("%w: control byte in status description", ErrBadHeader)
		}
		h.Description = desc
	}
	return nil
}

// Len returns the number of fields.
func (h Header) Len() int { return h.count }

// Get returns the first value of key.
func (h Header) Get(key string) ([]byte, bool) {
	for k, v := range h.All() {
		if string(k) == key {
			return v, true
		}
	}
	return nil, false
}

// All yields every field in order. The slices point into the block.
func (h Header) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		rest := h.fields
		for len(rest) > 0 {
			line, after, _ := cutLine(rest)
			k, v, _ := splitField(line) // validated by ParseHeader
			if !yield(k, v) {
				return
			}
			rest = after
		}
	}
}

// cutLine splits b at the first CRLF. A bare CR or LF is not a line end.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return nil, b, false
	}
	return b[:i:i], b[i+2:], true
}

// splitField splits "Key: Value" and validates both halves.
func splitField(line []byte) (key, value []byte, err error) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: field without ':'", ErrBadHeader)
	}
	key, value = line[:i:i], trimSeparators(line[i+1:])
	if !validHeaderKey(key) {
		return nil, nil, fmt.Errorf("%w: bad field name %q", ErrBadHeader, key)
	}
	if !validHeaderValue(value) {
		return nil, nil, fmt.Errorf("%w: control byte in value of %q", ErrBadHeader, key)
	}
	return key, value, nil
}

// validHeaderKey: printable ASCII without spaces or ':', as in HTTP tokens.
func validHeaderKey[T Text](k T) bool {
	if len(k) == 0 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// validHeaderValue: anything but control bytes other than tab. CR and LF in
// particular would end the field early.
func validHeaderValue[T Text](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
