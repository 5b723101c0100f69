package serial

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Errors of the json format's device lookup (counted as DropBadDevice).
var (
	errJSONNoDevice  = errors.New("json: device field not found")
	errJSONBadDevice = errors.New("json: device field is not a string or an integer")
)

// jsonDevice returns the device ID at path in doc, a document json.Valid
// accepts. Each path segment is an object key; when a key repeats, the last
// one wins (as encoding/json decides). The value must be a string or an
// integer literal; a string's escapes are decoded. The result may alias doc.
func jsonDevice(doc []byte, path []string) ([]byte, error) {
	v := trimJSONSpace(doc)
	for _, key := range path {
		var ok bool
		if v, ok = objectField(v, key); !ok {
			return nil, errJSONNoDevice
		}
	}
	switch {
	case len(v) >= 2 && v[0] == '"':
		return jsonStringValue(v)
	case isIntegerLiteral(v):
		return v, nil
	}
	return nil, errJSONBadDevice
}

// objectField returns the raw value of the last member named key of the
// object obj, or false when obj is not an object or has no such member.
func objectField(obj []byte, key string) ([]byte, bool) {
	if len(obj) == 0 || obj[0] != '{' {
		return nil, false
	}
	var found []byte
	ok := false
	i := skipJSONSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil, false
	}
	for i < len(obj) {
		kEnd := skipJSONString(obj, i)
		if kEnd < 0 {
			return nil, false
		}
		name := obj[i:kEnd]
		i = skipJSONSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		i = skipJSONSpace(obj, i+1)
		vEnd := skipJSONValue(obj, i)
		if vEnd < 0 {
			return nil, false
		}
		if jsonKeyEquals(name, key) {
			found, ok = obj[i:vEnd], true
		}
		i = skipJSONSpace(obj, vEnd)
		if i >= len(obj) {
			return nil, false
		}
		switch obj[i] {
		case ',':
			i = skipJSONSpace(obj, i+1)
		case '}':
			return found, ok
		default:
			return nil, false
		}
	}
	return nil, false
}

// jsonKeyEquals compares a quoted JSON key with key, decoding escapes only
// when there are some.
func jsonKeyEquals(quoted []byte, key string) bool {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1:len(quoted)-1]) == key
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == key
}

// jsonStringValue returns the contents of a quoted JSON string.
func jsonStringValue(quoted []byte) ([]byte, error) {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return quoted[1 : len(quoted)-1], nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, errJSONBadDevice
	}
	return []byte(s), nil
}

// skipJSONString returns the index after the string starting at i, or -1.
func skipJSONString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipJSONValue returns the index after the value starting at i, or -1.
func skipJSONValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipJSONString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipJSONString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	start := i
	for i < len(b) && !endsLiteral(b[i]) {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// endsLiteral reports whether c ends a number, true, false or null.
func endsLiteral(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

func trimJSONSpace(b []byte) []byte {
	b = b[skipJSONSpace(b, 0):]
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// isIntegerLiteral reports whether b is -?[0-9]+ (a JSON integer).
func isIntegerLiteral(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return true
}
