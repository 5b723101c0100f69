// Package jsonfield finds a device ID in a JSON document by a path of
// object keys ("meta.device"), for the serial and MQTT bridges. The scanning
// is tidwall/gjson's; what is decided here keeps encoding/json's answers:
// when a key repeats, the last one wins, and keys and strings are decoded as
// json.Unmarshal decodes them. Lookups allocate nothing unless a key or the
// value has escapes (or bytes that are not UTF-8).
package jsonfield

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Lookup follows path through the objects of doc, a document json.Valid
// accepts, and returns the value at the longest prefix of path that exists:
// raw is the value at path[:n] (aliasing doc). n == len(path) when the whole
// path was found; otherwise raw is an object without the key path[n], or
// not an object at all.
//
// Path keys are plain keys: gjson's path syntax (wildcards, #, @, escapes)
// does not apply, so any key is addressed as written.
func Lookup(doc []byte, path []string) (raw []byte, n int) {
	doc = bytes.TrimLeft(doc, " \t\r\n") // so that gjson's offsets count from doc[0]
	// gjson works on strings; doc is only read during the call, and what is
	// returned is a slice of doc, so the string need not be a copy.
	v := gjson.Parse(unsafe.String(unsafe.SliceData(doc), len(doc)))
	for n < len(path) {
		if !v.IsObject() {
			break
		}
		var last gjson.Result
		found := false
		v.ForEach(func(k, val gjson.Result) bool {
			if keyEquals(k.Raw, path[n]) {
				last, found = val, true
			}
			return true
		})
		if !found {
			break
		}
		v = last
		n++
	}
	return doc[v.Index : v.Index+len(v.Raw)], n
}

// keyEquals compares a quoted JSON key with key, decoding it only when it
// has escapes or is not UTF-8 (json.Unmarshal replaces such bytes).
func keyEquals(quoted, key string) bool {
	inner := quoted[1 : len(quoted)-1]
	if plain(inner) {
		return inner == key
	}
	var s string
	return json.Unmarshal([]byte(quoted), &s) == nil && s == key
}

func plain(s string) bool { return strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) }

// Scalar returns a device ID's text from a raw JSON value: a string's
// contents (escapes decoded as json.Unmarshal decodes them), or an integer
// literal (-?[0-9]+) as written. ok is false for anything else. The text may
// alias raw.
func Scalar(raw []byte) (text []byte, ok bool) {
	switch {
	case len(raw) >= 2 && raw[0] == '"':
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return inner, true
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false
		}
		return []byte(s), true
	case IsInteger(raw):
		return raw, true
	}
	return nil, false
}

// IsInteger reports whether b is -?[0-9]+ (a JSON integer).
func IsInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
