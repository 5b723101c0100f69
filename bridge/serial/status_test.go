package serial

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestStatusJSON: the /v1/status shape has every drop reason (zeros too)
// and no error time before an error.
func TestStatusJSON(t *testing.T) {
	p, err := New(portConfig("st", filepath.Join(t.TempDir(), "x")), openLog(t), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p.Status())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "path", "open", "frames_in", "stored", "dropped", "storage_errors",
		"pending", "opens", "reopens", "open_failures", "fd_refusals", "storage_waits", "bytes_in"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status JSON has no %q: %s", k, raw)
		}
	}
	for _, k := range []string{"last_error", "last_error_time", "resolved_path"} {
		if _, ok := m[k]; ok {
			t.Errorf("status JSON of a fresh port has %q: %s", k, raw)
		}
	}
	dropped, _ := m["dropped"].(map[string]any)
	for r := dropNone + 1; r < numDropReasons; r++ {
		if _, ok := dropped[r.String()]; !ok {
			t.Errorf("dropped has no %q: %s", r, raw)
		}
	}
}
