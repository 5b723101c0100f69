package modbus

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind of a decoded value.
type kind uint8

const (
	kindNone kind = iota // not read (failed)
	kindInt
	kindUint
	kindFloat // float32 (bits 32) or float64, or any scaled number
	kindBool
	kindBools
	kindString
)

// Value is one decoded register value.
type Value struct {
	kind  kind
	bits  int // of a float: 32 or 64, for printing the shortest exact form
	i     int64
	u     uint64
	f     float64
	b     bool
	bools []bool
	s     string
}

// Float is the value as a number (bools 0/1; strings and arrays NaN).
func (v Value) Float() float64 {
	switch v.kind {
	case kindInt:
		return float64(v.i)
	case kindUint:
		return float64(v.u)
	case kindFloat:
		return v.f
	case kindBool:
		if v.b {
			return 1
		}
		return 0
	}
	return math.NaN()
}

// Any is the value as a Go value (int64, uint64, float64, bool, []bool,
// string; nil when not read), for tests and the CLI.
func (v Value) Any() any {
	switch v.kind {
	case kindInt:
		return v.i
	case kindUint:
		return v.u
	case kindFloat:
		return v.f
	case kindBool:
		return v.b
	case kindBools:
		return v.bools
	case kindString:
		return v.s
	}
	return nil
}

// decodeValue decodes register r from the data of a read starting at addr:
// bits for the bit tables, big-endian register words otherwise.
func decodeValue(r Register, addr int, data []byte) (Value, error) {
	off := r.Address - addr
	if off < 0 {
		return Value{}, fmt.Errorf("register %q: address %d before the read's %d", r.Name, r.Address, addr)
	}
	if r.Function.bits() {
		if (off+r.Count+7)/8 > len(data) {
			return Value{}, fmt.Errorf("register %q: %d bits past %d data bytes", r.Name, off+r.Count, len(data))
		}
		bit := func(k int) bool { return data[k/8]>>(k%8)&1 == 1 }
		if r.Count == 1 {
			return Value{kind: kindBool, b: bit(off)}, nil
		}
		bs := make([]bool, r.Count)
		for k := range bs {
			bs[k] = bit(off + k)
		}
		return Value{kind: kindBools, bools: bs}, nil
	}
	n := r.size()
	if 2*(off+n) > len(data) {
		return Value{}, fmt.Errorf("register %q: %d registers past %d data bytes", r.Name, off+n, len(data))
	}
	var buf [8]byte
	raw := data[2*off : 2*(off+n)]
	if r.Type == String {
		b := make([]byte, len(raw))
		copy(b, raw)
		if r.ByteOrder == Little {
			swapBytes(b)
		}
		s := strings.TrimRight(string(b), "\x00 ")
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		return Value{kind: kindString, s: s}, nil
	}
	w := buf[:2*n]
	copy(w, raw)
	if r.ByteOrder == Little {
		swapBytes(w)
	}
	if r.WordOrder == Little && n > 1 {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			w[2*i], w[2*i+1], w[2*j], w[2*j+1] = w[2*j], w[2*j+1], w[2*i], w[2*i+1]
		}
	}
	var v Value
	switch r.Type {
	case Bool:
		return Value{kind: kindBool, b: binary.BigEndian.Uint16(w) != 0}, nil
	case Int16:
		v = Value{kind: kindInt, i: int64(int16(binary.BigEndian.Uint16(w)))}
	case Uint16:
		v = Value{kind: kindUint, u: uint64(binary.BigEndian.Uint16(w))}
	case Int32:
		v = Value{kind: kindInt, i: int64(int32(binary.BigEndian.Uint32(w)))}
	case Uint32:
		v = Value{kind: kindUint, u: uint64(binary.BigEndian.Uint32(w))}
	case Int64:
		v = Value{kind: kindInt, i: int64(binary.BigEndian.Uint64(w))}
	case Uint64:
		v = Value{kind: kindUint, u: binary.BigEndian.Uint64(w)}
	case Float32:
		v = Value{kind: kindFloat, bits: 32, f: float64(math.Float32frombits(binary.BigEndian.Uint32(w)))}
	case Float64:
		v = Value{kind: kindFloat, bits: 64, f: math.Float64frombits(binary.BigEndian.Uint64(w))}
	default:
		return Value{}, fmt.Errorf("register %q: type %q", r.Name, r.Type)
	}
	if r.Scale != 1 || r.Offset != 0 {
		scale := r.Scale
		v = Value{kind: kindFloat, bits: 64, f: round15(v.Float()*scale + r.Offset)}
	}
	return v, nil
}

// round15 rounds away the binary noise of a decimal scale (2301*0.1 is
// 230.10000000000002): to 15 significant digits, which a float64 holds.
func round15(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
		return f
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 15, 64), 64)
	if err != nil {
		return f
	}
	return r
}

func swapBytes(b []byte) {
	for i := 0; i+1 < len(b); i += 2 {
		b[i], b[i+1] = b[i+1], b[i]
	}
}

// appendJSON appends v as a JSON value; NaN and infinities, which JSON
// cannot hold, become null.
func (v Value) appendJSON(dst []byte) []byte {
	switch v.kind {
	case kindInt:
		return strconv.AppendInt(dst, v.i, 10)
	case kindUint:
		return strconv.AppendUint(dst, v.u, 10)
	case kindFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, v.f, 'g', -1, v.bits)
	case kindBool:
		return strconv.AppendBool(dst, v.b)
	case kindBools:
		dst = append(dst, '[')
		for i, b := range v.bools {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendBool(dst, b)
		}
		return append(dst, ']')
	case kindString:
		q, _ := json.Marshal(v.s) // strings are rare: no JSON writer of our own
		return append(dst, q...)
	}
	return append(dst, "null"...)
}

// changed says whether v differs from old by more than deadband (numbers)
// or at all (everything else, and a change of kind).
func (v Value) changed(old Value, deadband float64) bool {
	if v.kind != old.kind {
		return true
	}
	switch v.kind {
	case kindBool:
		return v.b != old.b
	case kindBools:
		return !slices.Equal(v.bools, old.bools)
	case kindString:
		return v.s != old.s
	case kindNone:
		return false
	}
	a, b := v.Float(), old.Float()
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) != math.IsNaN(b)
	}
	if deadband == 0 {
		return a != b || v.i != old.i || v.u != old.u
	}
	return math.Abs(a-b) > deadband
}
