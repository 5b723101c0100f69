package serial

import (
	"bytes"
	"errors"
)

// Limits of the line format: a frame with more fields is malformed, which
// keeps the duplicate-key check small and allocation-free.
const (
	maxLineFields = 128
	maxLineKeyLen = 64
)

// Errors of the line format (all counted as DropMalformed).
var (
	errLineEmptyField  = errors.New("line: empty field")
	errLineNoEquals    = errors.New("line: field without '='")
	errLineBadKey      = errors.New("line: key must be 1-64 bytes of [A-Za-z0-9_.-]")
	errLineDuplicate   = errors.New("line: duplicate key")
	errLineTooManyKeys = errors.New("line: too many fields")
)

// lineParser parses the line format. Its scratch space is reused, so a
// steady stream of frames allocates nothing; it is not safe for concurrent use.
type lineParser struct {
	keys [maxLineFields][]byte
}

// parse turns `device,key=value,...` into a JSON object appended to dst.
// Fields are separated by ',' (values cannot contain one) and trimmed of
// spaces and tabs. The first field is the device unless it contains '=';
// then the line has no device and device is nil. Values that are JSON numbers
// become numbers, others strings. frame must be valid UTF-8.
func (lp *lineParser) parse(frame, dst []byte) (device, out []byte, err error) {
	rest := frame
	first := true
	nkeys := 0
	dst = append(dst, '{')
	for {
		field, tail, more := bytes.Cut(rest, []byte{','})
		rest = tail
		field = trimBlank(field)
		if len(field) == 0 {
			return nil, dst, errLineEmptyField
		}
		eq := bytes.IndexByte(field, '=')
		switch {
		case first && eq < 0:
			device = field
		case eq < 0:
			return nil, dst, errLineNoEquals
		default:
			key, val := trimBlank(field[:eq]), trimBlank(field[eq+1:])
			if err := lp.addKey(key, nkeys); err != nil {
				return nil, dst, err
			}
			if nkeys > 0 {
				dst = append(dst, ',')
			}
			nkeys++
			dst = appendJSONString(dst, key)
			dst = append(dst, ':')
			if isJSONNumber(val) {
				dst = append(dst, val...)
			} else {
				dst = appendJSONString(dst, val)
			}
		}
		first = false
		if !more {
			break
		}
	}
	return device, append(dst, '}'), nil
}

// addKey validates key and checks it against the n keys seen before.
func (lp *lineParser) addKey(key []byte, n int) error {
	if n >= maxLineFields {
		return errLineTooManyKeys
	}
	if len(key) == 0 || len(key) > maxLineKeyLen {
		return errLineBadKey
	}
	for _, c := range key {
		if !nameByte(c) {
			return errLineBadKey
		}
	}
	for _, k := range lp.keys[:n] {
		if bytes.Equal(k, key) {
			return errLineDuplicate
		}
	}
	lp.keys[n] = key
	return nil
}

func trimBlank(b []byte) []byte {
	return bytes.Trim(b, " \t")
}
