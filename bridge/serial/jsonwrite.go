package serial

import (
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. s must be valid UTF-8 (frames
// are checked before parsing); quotes, backslashes and control characters are
// escaped.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isJSONNumber reports whether b is a number in JSON's grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) that fits a float64, so
// that it can be written as is and every consumer reads the same value.
func isJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	intDigits := i
	if i < len(b) && b[i] == '.' {
		i++
		if !(i < len(b) && isDigit(b[i])) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	hasExp := false
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		hasExp = true
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !(i < len(b) && isDigit(b[i])) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i != len(b) {
		return false
	}
	// Without an exponent only more than 308 integer digits can overflow;
	// ParseFloat (which allocates the string) is needed only then.
	if !hasExp && intDigits <= 308 {
		return true
	}
	_, err := strconv.ParseFloat(string(b), 64)
	return err == nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validUTF8 is utf8.Valid; named for the reader of decode.go.
func validUTF8(b []byte) bool { return utf8.Valid(b) }
