package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"edgeq/internal/jsonfield"
)

// Seed corpora are under testdata/fuzz/<target>.

// FuzzTopicTemplate checks Match against a plain MQTT filter matcher: a
// template matches a topic exactly when its filter does and the device level
// is non-empty, and the device is that level.
func FuzzTopicTemplate(f *testing.F) {
	f.Add("sensors/{device}/telemetry", "sensors/t1/telemetry")
	f.Add("+/{device}/#", "a/b/c/d")
	f.Fuzz(func(t *testing.T, template, topic string) {
		tmpl, err := CompileTemplate(template)
		if err != nil {
			return
		}
		filter := tmpl.Filter()
		if err := ValidateTopicFilter(filter); err != nil {
			t.Fatalf("template %q has an invalid filter %q: %v", template, filter, err)
		}
		device, ok := tmpl.Match(topic)
		wantDevice, wantOK := referenceMatch(template, topic)
		if ok != wantOK || device != wantDevice {
			t.Fatalf("%q.Match(%q) = %q, %v; reference %q, %v", template, topic, device, ok, wantDevice, wantOK)
		}
		if ok && strings.Contains(device, "/") {
			t.Fatalf("device %q spans levels", device)
		}
	})
}

// referenceMatch is MQTT filter matching written the obvious way.
func referenceMatch(template, topic string) (string, bool) {
	tl, pl := strings.Split(template, "/"), strings.Split(topic, "/")
	if strings.HasPrefix(topic, "$") && (tl[0] == "+" || tl[0] == "#" || tl[0] == deviceLevel) {
		return "", false
	}
	device := ""
	for i, want := range tl {
		if want == "#" {
			return device, device != ""
		}
		if i >= len(pl) {
			return "", false
		}
		switch want {
		case deviceLevel:
			device = pl[i]
		case "+":
		default:
			if pl[i] != want {
				return "", false
			}
		}
	}
	if len(pl) != len(tl) {
		return "", false
	}
	return device, device != ""
}

// FuzzJSONField checks Extract against decoding the whole payload into Go
// values and walking the path.
func FuzzJSONField(f *testing.F) {
	f.Add("meta.device", []byte(`{"meta":{"device":"t1"}}`))
	f.Add("id", []byte(`{"id":42}`))
	f.Fuzz(func(t *testing.T, path string, payload []byte) {
		field, err := ParseJSONField(path)
		if err != nil {
			return
		}
		got, err := field.Extract(payload)
		want, wantErr := referenceExtract(strings.Split(path, "."), payload)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("Extract(%q, %q) = %q, %v; reference %q, %v", path, payload, got, err, want, wantErr)
		case err == nil && got != want:
			t.Fatalf("Extract(%q, %q) = %q; reference %q", path, payload, got, want)
		case err != nil && !errors.Is(err, wantErr):
			t.Fatalf("Extract(%q, %q) error %v; reference %v", path, payload, err, wantErr)
		}
	})
}

func referenceExtract(path []string, payload []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() || !json.Valid(payload) {
		return "", errBadJSON
	}
	if _, ok := v.(map[string]any); !ok {
		return "", errBadJSON
	}
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return "", errMissingField
		}
		if v, ok = obj[k]; !ok {
			return "", errMissingField
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		if _, err := x.Int64(); err == nil || jsonfield.IsInteger([]byte(x.String())) {
			return x.String(), nil
		}
	}
	return "", errFieldType
}
