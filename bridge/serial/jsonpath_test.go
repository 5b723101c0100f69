package serial

import (
	"errors"
	"strings"
	"testing"
)

func TestJSONDevice(t *testing.T) {
	tests := []struct {
		doc  string
		path string
		want string
		err  error
	}{
		{`{"id":"meter-1","t":1}`, "id", "meter-1", nil},
		{` { "t" : [1,{"id":"no"}] , "id" : "m2" } `, "id", "m2", nil},
		{`{"meta":{"device":"d-3","x":{"device":"deeper"}},"device":"top"}`, "meta.device", "d-3", nil},
		{`{"id":42}`, "id", "42", nil},
		{`{"id":-7}`, "id", "-7", nil},
		{`{"id":"\u006d1"}`, "id", "m1", nil},
		{`{"i\u0064":"esc-key"}`, "id", "esc-key", nil},
		{`{"id":"first","id":"last"}`, "id", "last", nil},
		{`{"id":"a\"b"}`, "id", `a"b`, nil},
		{`{"x":"}{\"id\":\"fake\"}","id":"real"}`, "id", "real", nil},
		{`{"id":4.5}`, "id", "", errJSONBadDevice},
		{`{"id":null}`, "id", "", errJSONBadDevice},
		{`{"id":true}`, "id", "", errJSONBadDevice},
		{`{"id":{"a":1}}`, "id", "", errJSONBadDevice},
		{`{"ID":"x"}`, "id", "", errJSONNoDevice},
		{`{}`, "id", "", errJSONNoDevice},
		{`["id"]`, "id", "", errJSONNoDevice},
		{`"id"`, "id", "", errJSONNoDevice},
		{`{"meta":"d"}`, "meta.device", "", errJSONNoDevice},
		{`{"meta":[{"device":"d"}]}`, "meta.device", "", errJSONNoDevice},
	}
	for _, tt := range tests {
		t.Run(tt.doc+"@"+tt.path, func(t *testing.T) {
			got, err := jsonDevice([]byte(tt.doc), strings.Split(tt.path, "."))
			if !errors.Is(err, tt.err) || string(got) != tt.want {
				t.Fatalf("jsonDevice = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestJSONDeviceNoAllocations(t *testing.T) {
	doc := []byte(`{"meta":{"device":"meter-1"},"t":21.5,"h":[1,2,3]}`)
	path := []string{"meta", "device"}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := jsonDevice(doc, path); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("jsonDevice allocates %.1f times, want 0", allocs)
	}
}
