package mqttproto

import (
	"unicode/utf8"
)

// reader decodes the fields of one packet body. The first failure is kept
// (sticky) and every later read returns zero values, so a decoder reads its
// fields straight through and checks r.err once.
type reader struct {
	b   []byte
	i   int
	t   Type
	err *Error
}

func (r *reader) fail(sentinel error, field, detail string) {
	if r.err == nil {
		r.err = newErr(sentinel, r.t, field, detail)
	}
}

func (r *reader) left() int { return len(r.b) - r.i }

func (r *reader) short(field string, n int) bool {
	if r.err != nil {
		return true
	}
	if r.left() < n {
		r.fail(ErrMalformed, field, "runs past the end of the packet")
		return true
	}
	return false
}

func (r *reader) u8(field string) byte {
	if r.short(field, 1) {
		return 0
	}
	v := r.b[r.i]
	r.i++
	return v
}

func (r *reader) u16(field string) uint16 {
	if r.short(field, 2) {
		return 0
	}
	v := uint16(r.b[r.i])<<8 | uint16(r.b[r.i+1])
	r.i += 2
	return v
}

func (r *reader) u32(field string) uint32 {
	if r.short(field, 4) {
		return 0
	}
	b := r.b[r.i:]
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	r.i += 4
	return v
}

// varint reads a Variable Byte Integer: at most 4 bytes, minimal encoding.
func (r *reader) varint(field string) uint32 {
	if r.err != nil {
		return 0
	}
	v, n, res := readVarint(r.b[r.i:])
	switch res {
	case varintShort:
		r.fail(ErrMalformed, field, "runs past the end of the packet")
		return 0
	case varintTooLong:
		r.fail(ErrMalformed, field, "variable byte integer longer than 4 bytes")
		return 0
	case varintNotMinimal:
		r.fail(ErrMalformed, field, "variable byte integer not in its shortest form")
		return 0
	}
	r.i += n
	return v
}

// bin reads Binary Data: a 2-byte length and that many bytes. The slice
// has its capacity cut, so appending to it never writes over the packet.
func (r *reader) bin(field string) []byte {
	n := int(r.u16(field))
	if r.short(field, n) {
		return nil
	}
	v := r.b[r.i : r.i+n : r.i+n]
	r.i += n
	return v
}

// str reads a UTF-8 Encoded String: valid UTF-8, no surrogates, no U+0000.
func (r *reader) str(field string) []byte {
	v := r.bin(field)
	if r.err == nil {
		if detail := checkUTF8(v); detail != "" {
			r.fail(ErrMalformed, field, detail)
			return nil
		}
	}
	return v
}

// rest returns the bytes not read yet.
func (r *reader) rest() []byte {
	if r.err != nil {
		return nil
	}
	v := r.b[r.i:len(r.b):len(r.b)]
	r.i = len(r.b)
	return v
}

func (r *reader) end() {
	if r.err == nil && r.left() != 0 {
		r.fail(ErrMalformed, "", "bytes left over after the last field")
	}
}

type varintResult byte

const (
	varintOK varintResult = iota
	varintShort
	varintTooLong
	varintNotMinimal
)

// readVarint decodes a Variable Byte Integer from the start of b. A
// non-minimal encoding (a last byte of 0 after the first) is refused, as
// MQTT 5.0 section 1.5.5 requires of every encoder.
func readVarint(b []byte) (v uint32, n int, res varintResult) {
	var shift uint
	for n < 4 {
		if n >= len(b) {
			return 0, 0, varintShort
		}
		c := b[n]
		v |= uint32(c&0x7f) << shift
		n++
		if c&0x80 == 0 {
			if c == 0 && n > 1 {
				return 0, 0, varintNotMinimal
			}
			return v, n, varintOK
		}
		shift += 7
	}
	return 0, 0, varintTooLong
}

// checkUTF8 returns what is wrong with s as an MQTT UTF-8 Encoded String,
// or "" when nothing is. Go's decoder refuses surrogate halves and overlong
// forms already.
func checkUTF8(s []byte) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0 {
			return "contains U+0000"
		}
		if c >= utf8.RuneSelf {
			if !utf8.Valid(s[i:]) {
				return "invalid UTF-8 (or a surrogate)"
			}
			for _, c := range s[i:] {
				if c == 0 {
					return "contains U+0000"
				}
			}
			return ""
		}
	}
	return ""
}
