package apiv1

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.txt")

// wireFields lists every JSON field under t as "path kind tag", walking
// structs (embedded ones inline), slices, maps and pointers.
func wireFields(t reflect.Type, prefix string, out *[]string, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		wireFields(t.Elem(), prefix+"[]", out, seen)
	case reflect.Map:
		*out = append(*out, prefix+" map["+t.Key().Kind().String()+"]")
		wireFields(t.Elem(), prefix+"{}", out, seen)
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			*out = append(*out, prefix+" time")
			return
		}
		if seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			if f.Anonymous && tag == "" {
				wireFields(f.Type, prefix, out, seen)
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			*out = append(*out, prefix+"."+name+" "+f.Type.Kind().String()+" "+tag)
			wireFields(f.Type, prefix+"."+name, out, seen)
		}
	}
}

// TestWireFormat: the documents' JSON fields (names, kinds, options) are
// the ones in testdata/wire.txt, which was read off the types before they
// moved here. A renamed, removed or retyped field fails; a field added on
// purpose is taken in with -update.
func TestWireFormat(t *testing.T) {
	var got []string
	for name, v := range map[string]any{"status": Status{}, "device": DeviceView{}, "group": GroupInfo{}, "publish": PublishResponse{}} {
		wireFields(reflect.TypeOf(v), name, &got, map[reflect.Type]bool{})
	}
	slices.Sort(got)
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile("testdata/wire.txt", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/wire.txt")
	if err != nil {
		t.Fatal(err)
	}
	if text != string(want) {
		wl := strings.Split(string(want), "\n")
		for _, l := range got {
			if !slices.Contains(wl, l) {
				t.Errorf("not in testdata/wire.txt: %s", l)
			}
		}
		for _, l := range wl {
			if l != "" && !slices.Contains(got, l) {
				t.Errorf("gone from the API: %s", l)
			}
		}
	}
}
