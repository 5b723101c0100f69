package jsonfield

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		doc, path string
		want      string // the value's text (Scalar), or the raw value where not found
		n         int    // keys resolved; -1: all of them
		scalar    bool
	}{
		{`{"id":"meter-1","t":1}`, "id", "meter-1", -1, true},
		{` { "t" : [1,{"id":"no"}] , "id" : "m2" } `, "id", "m2", -1, true},
		{"\n\t{\"id\":\"lead-ws\"}", "id", "lead-ws", -1, true},
		{`{"meta":{"device":"d-3","x":{"device":"deeper"}},"device":"top"}`, "meta.device", "d-3", -1, true},
		{`{"id":42}`, "id", "42", -1, true},
		{`{"id":-7}`, "id", "-7", -1, true},
		{`{"id":"\u006d1"}`, "id", "m1", -1, true},
		{`{"i\u0064":"esc-key"}`, "id", "esc-key", -1, true},
		{`{"id":"first","id":"last"}`, "id", "last", -1, true},
		{`{"a":{"x":"1"},"a":{"y":"2"}}`, "a.y", "2", -1, true}, // the last a, as encoding/json
		{`{"a":{"x":"1"},"a":{"y":"2"}}`, "a.x", `{"y":"2"}`, 1, false},
		{`{"id":"a\"b"}`, "id", `a"b`, -1, true},
		{`{"x":"}{\"id\":\"fake\"}","id":"real"}`, "id", "real", -1, true},
		{`{"*":"star","#":"hash","a|b":"pipe","@this":"at"}`, "@this", "at", -1, true}, // no gjson path syntax
		{`{"*":"star"}`, "*", "star", -1, true},
		{`{"id":4.5}`, "id", "4.5", -1, false},
		{`{"id":1e3}`, "id", "1e3", -1, false},
		{`{"id":null}`, "id", "null", -1, false},
		{`{"id":true}`, "id", "true", -1, false},
		{`{"id":{"a":1}}`, "id", `{"a":1}`, -1, false},
		{`{"ID":"x"}`, "id", `{"ID":"x"}`, 0, false},
		{`{}`, "id", `{}`, 0, false},
		{`["id"]`, "id", `["id"]`, 0, false},
		{`"id"`, "id", `"id"`, 0, false},
		{`{"meta":"d"}`, "meta.device", `"d"`, 1, false},
		{`{"meta":[{"device":"d"}]}`, "meta.device", `[{"device":"d"}]`, 1, false},
	}
	for _, tt := range tests {
		path := strings.Split(tt.path, ".")
		raw, n := Lookup([]byte(tt.doc), path)
		wantN := tt.n
		if wantN < 0 {
			wantN = len(path)
		}
		text, ok := Scalar(raw)
		ok = ok && n == len(path)
		got := string(raw)
		if ok {
			got = string(text)
		}
		if n != wantN || ok != tt.scalar || strings.TrimSpace(got) != tt.want {
			t.Errorf("Lookup(%s, %s) = %q (scalar %v), %d keys; want %q (scalar %v), %d", tt.doc, tt.path, got, ok, n, tt.want, tt.scalar, wantN)
		}
	}
}

func TestScalarDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range []string{`"plain"`, `"caf\u00e9"`, `"\ud800"`, "\"bad \xff utf8\"", `"tab\tand\\"`, `"\ud83d\ude00"`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		got, ok := Scalar([]byte(raw))
		if !ok || string(got) != want {
			t.Errorf("Scalar(%q) = %q, %v; encoding/json says %q", raw, got, ok, want)
		}
	}
}

func TestLookupNoAllocations(t *testing.T) {
	doc := []byte(`{"meta":{"device":"meter-1"},"t":21.5,"h":[1,2,3]}`)
	path := []string{"meta", "device"}
	allocs := testing.AllocsPerRun(100, func() {
		raw, n := Lookup(doc, path)
		if _, ok := Scalar(raw); !ok || n != 2 {
			t.Fatal("not found")
		}
	})
	if allocs != 0 {
		t.Fatalf("Lookup allocates %.1f times, want 0", allocs)
	}
}

// reference walks the path over encoding/json's decoding of doc.
func reference(doc []byte, path []string) (text string, found, scalar bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false, false
	}
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false, false
		}
		if v, ok = m[k]; !ok {
			return "", false, false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true, true
	case json.Number:
		if IsInteger([]byte(x)) {
			return string(x), true, true
		}
	}
	return "", true, false
}

// FuzzLookup checks Lookup and Scalar against encoding/json on every valid
// JSON document, UTF-8 or not.
func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"meta":{"device":"d-3"},"id":"top"}`), "meta.device")
	f.Add([]byte(`{"id":1,"id":"\u0041"}`), "id")
	f.Add([]byte("{\"\xff\":\"x\"}"), "\ufffd")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		if !json.Valid(doc) || len(path) > 256 {
			return
		}
		segs := strings.Split(path, ".")
		raw, n := Lookup(doc, segs)
		text, scalar := Scalar(raw)
		want, wantFound, wantScalar := reference(doc, segs)
		if (n == len(segs)) != wantFound || (wantFound && scalar != wantScalar) || (wantScalar && string(text) != want) {
			t.Fatalf("Lookup(%q, %q) = %q, %d keys, scalar %v %q; encoding/json: found %v, scalar %v %q", doc, path, raw, n, scalar, text, wantFound, wantScalar, want)
		}
	})
}
