package mqtt

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"edgeq/internal/jsonfield"
)

// maxFieldDepth bounds a JSON field path; deeper paths are a configuration
// mistake, and each level costs one decode of the enclosing object.
const maxFieldDepth = 16

// Errors of JSON field extraction; each one is an unmappable reason.
var (
	errBadJSON      = errors.New("payload is not a JSON object")
	errMissingField = errors.New("field missing")
	errFieldType    = errors.New("field is not a string or an integer")
)

// JSONField is a dot path into a JSON object, such as "meta.device". Keys that
// themselves contain a dot cannot be addressed. It is immutable and safe for
// concurrent use.
type JSONField struct {
	path []string
}

// ParseJSONField parses a dot path of 1..16 non-empty keys.
func ParseJSONField(s string) (*JSONField, error) {
	if s == "" {
		return nil, errors.New("empty field path")
	}
	path := strings.Split(s, ".")
	if len(path) > maxFieldDepth {
		return nil, fmt.Errorf("field path %q: %d levels, at most %d", s, len(path), maxFieldDepth)
	}
	for _, k := range path {
		if k == "" {
			return nil, fmt.Errorf("field path %q: empty key", s)
		}
	}
	return &JSONField{path: path}, nil
}

// String returns the path as written.
func (f *JSONField) String() string { return strings.Join(f.path, ".") }

// Extract returns the field's value from a JSON object payload: a string as it
// is, an integer as its decimal text. It returns errBadJSON, errMissingField or
// errFieldType (wrapped) when there is no such value. Duplicate keys: the last
// one wins, as in encoding/json.
func (f *JSONField) Extract(payload []byte) (string, error) {
	// Validate everything once: a truncated payload must not pass just because
	// the field came before the damage.
	if !json.Valid(payload) {
		return "", errBadJSON
	}
	raw, n := jsonfield.Lookup(payload, f.path)
	switch {
	case n == 0 && (len(raw) == 0 || raw[0] != '{'):
		return "", errBadJSON
	case n < len(f.path) && raw[0] != '{':
		return "", fmt.Errorf("%w: %q is not an object", errMissingField, strings.Join(f.path[:n], "."))
	case n < len(f.path):
		return "", fmt.Errorf("%w: %q", errMissingField, strings.Join(f.path[:n+1], "."))
	}
	text, ok := jsonfield.Scalar(raw)
	if !ok {
		return "", fmt.Errorf("%w: %.32s", errFieldType, raw)
	}
	return string(text), nil
}
