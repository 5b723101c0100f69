package natsproto

import "fmt"

// maxArgs is the most fields any verb takes (HPUB: subject reply hdr total).
const maxArgs = 4

// splitArgs splits s on runs of spaces and tabs into out. It returns the
// number of fields, or maxArgs+1 when there are more than maxArgs. Each field
// is capped so that appending to it cannot overwrite the stream.
func splitArgs(s []byte, out *[maxArgs][]byte) int {
	n := 0
	for i := 0; i < len(s); {
		if isSeparator(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && !isSeparator(s[j]) {
			j++
		}
		if n == maxArgs {
			return maxArgs + 1
		}
		out[n] = s[i:j:j]
		n++
		i = j
	}
	return n
}

// maxDigits keeps parsed numbers far from int64 overflow.
const maxDigits = 18

// parseCount parses a non-negative decimal number: digits only, no sign.
func parseCount(b []byte) (int64, bool) {
	if len(b) > maxDigits {
		return 0, false
	}
	n, ok := ParseUint(b)
	return int64(n), ok
}

// ParseUint parses a decimal uint64 of 1..19 digits (no sign) without
// allocating, as ack subjects carry them; false on anything else.
func ParseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// trimSeparators trims spaces and tabs at both ends.
func trimSeparators(b []byte) []byte {
	for len(b) > 0 && isSeparator(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSeparator(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// snippetLen bounds how much of an offending line goes into an error.
const snippetLen = 32

// opError wraps a sentinel with the start of the offending line.
func opError(sentinel error, line []byte) error {
	s := line
	if len(s) > snippetLen {
		s = s[:snippetLen]
	}
	return fmt.Errorf("%w: %q", sentinel, s)
}
