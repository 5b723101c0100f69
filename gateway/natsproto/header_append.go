package natsproto

import (
	"fmt"
	"strconv"
)

// A header block is built with the appenders, in order, into a caller's
// buffer; with enough capacity nothing is allocated:
//
//	b, err := AppendHeaderStart(b, 0, "")
//	b, err = AppendHeaderField(b, "Edgeq-Device", dev)
//	b = AppendHeaderEnd(b)
//
// On error dst is returned unchanged, so a field that would break the
// framing is never half-written.

// AppendHeaderStart appends the version line: "NATS/1.0\r\n" for status 0,
// else "NATS/1.0 <status>[ <description>]\r\n" with a 3-digit status.
func AppendHeaderStart(dst []byte, status int, description string) ([]byte, error) {
	if status == 0 {
		if description != "" {
			return dst, fmt.Errorf("%w: description without status", ErrBadHeader)
		}
		return append(dst, headerVersion+"\r\n"...), nil
	}
	if status < 100 || status > 999 {
		return dst, fmt.Errorf("%w: status %d is not 3 digits", ErrBadHeader, status)
	}
	if !validHeaderValue(description) {
		return dst, fmt.Errorf("%w: control byte in status description", ErrBadHeader)
	}
	dst = append(dst, headerVersion+" "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	if description != "" {
		dst = append(dst, ' ')
		dst = append(dst, description...)
	}
	return append(dst, "\r\n"...), nil
}

// AppendHeaderField appends "key: value\r\n". The key must be printable
// ASCII without spaces or ':'; the value must hold no control bytes but tab.
// ParseHeader trims spaces and tabs around values, so they do not survive.
func AppendHeaderField[T Text](dst []byte, key string, value T) ([]byte, error) {
	if !validHeaderKey(key) {
		return dst, fmt.Errorf("%w: bad field name %q", ErrBadHeader, key)
	}
	if !validHeaderValue(value) {
		return dst, fmt.Errorf("%w: control byte in value of %q", ErrBadHeader, key)
	}
	dst = append(dst, key...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...), nil
}

// AppendHeaderInt appends "key: <decimal v>\r\n", for the Edgeq-Seq,
// Edgeq-Offset and similar headers.
func AppendHeaderInt(dst []byte, key string, v int64) ([]byte, error) {
	if !validHeaderKey(key) {
		return dst, fmt.Errorf("%w: bad field name %q", ErrBadHeader, key)
	}
	dst = append(dst, key...)
	dst = append(dst, ": "...)
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, "\r\n"...), nil
}

// AppendHeaderEnd appends the empty line that ends a header block.
func AppendHeaderEnd(dst []byte) []byte { return append(dst, "\r\n"...) }
