package metrics_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/metrics/lint"
)

// TestHealthFromFixtures reads the fake Raspberry Pi 4: busy CPU is every
// mode but idle and iowait, the temperatures are the readable zones only,
// and the disk is the data directory's filesystem.
func TestHealthFromFixtures(t *testing.T) {
	h := devicemetrics.Health(fixtureSamples(t))
	busy := 1827.36 + 10.24 + 953.1 + 0 + 33.12 + 0
	total := busy + 81234.56 + 204.17
	checks := []struct {
		name      string
		got, want any
	}{
		{"cpus", deref(h.CPUs), 4},
		{"busy", round(deref(h.CPUBusySeconds)), round(busy)},
		{"total", round(deref(h.CPUTotalSeconds)), round(total)},
		{"load1", deref(h.Load1), 0.52},
		{"load15", deref(h.Load15), 0.59},
		{"memory total", deref(h.MemoryTotalBytes), uint64(3977408512)},
		{"memory available", deref(h.MemoryAvailableBytes), uint64(3254788096)},
		{"disk size", deref(h.DiskSizeBytes), uint64(7_500_000 * 4096)},
		{"disk avail", deref(h.DiskAvailBytes), uint64(4_600_000 * 4096)},
		{"rss", deref(h.ProcessRSSBytes), uint64(12582912)},
		{"fds", deref(h.OpenFDs), uint64(7)},
		{"max fds", deref(h.MaxFDs), uint64(4096)},
		{"zones", len(h.Temperatures), 2},
		{"failed", len(h.Failed), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if cpu, ok := h.CPUTemperature(); !ok || cpu.Type != "cpu-thermal" || cpu.Celsius != 48.312 {
		t.Errorf("CPU temperature %+v %v, want cpu-thermal at 48.312", cpu, ok)
	}
}

// TestHealthMissingRoots: with nothing readable, every value is absent
// (null in JSON, never 0) and every collector is listed as failed.
func TestHealthMissingRoots(t *testing.T) {
	h := devicemetrics.Health(missingRootSamples(t))
	want := []string{"cpu", "load", "memory", "uptime", "process", "thermal", "network", "filesystem", "disk"}
	if !slices.Equal(h.Failed, want) {
		t.Errorf("failed = %v, want %v", h.Failed, want)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"failed_collectors":["cpu","load","memory","uptime","process","thermal","network","filesystem","disk"]}` {
		t.Errorf("JSON %s: values of failed collectors must be absent", b)
	}
	if _, ok := h.CPUTemperature(); ok {
		t.Error("a CPU temperature without thermal zones")
	}
	// The exposition says the same: success 0 for every collector.
	var buf bytes.Buffer
	RenderDevice(&buf, missingRootSamples(t))
	v := mustValues(t, buf.Bytes())
	for _, c := range want {
		if got, ok := v[lint.Key("edgeq_collector_success", "collector", c)]; !ok || got != 0 {
			t.Errorf("edgeq_collector_success{collector=%q} = %v (present %v), want 0", c, got, ok)
		}
	}
}

// TestExpositionWrite: the whole page, Go runtime metrics and the scrape
// counters of the exposition's own set included, lints clean, and the
// counters move with Observe.
func TestExpositionWrite(t *testing.T) {
	x := NewExposition()
	s := richSnapshot(t, 10, 2)
	for range 3 {
		x.Observe(0)
	}
	var b bytes.Buffer
	x.Write(&b, s)
	r := lint.Check(b.Bytes(), lint.Policy{Prefix: "edgeq_"})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	v := mustValues(t, b.Bytes())
	if got := v["edgeq_metrics_scrapes_total"]; got != 3 {
		t.Errorf("scrapes = %v, want 3", got)
	}
	if got := v[lint.Key("edgeq_metrics_scrape_duration_seconds_bucket", "le", "0.0005")]; got != 3 {
		t.Errorf("scrapes under 0.5 ms = %v, want 3", got)
	}
	if !strings.Contains(b.String(), "\ngo_goroutines ") {
		t.Error("no Go runtime metrics")
	}
	// A second exposition has its own counters.
	var b2 bytes.Buffer
	NewExposition().Write(&b2, s)
	if v2 := mustValues(t, b2.Bytes()); v2["edgeq_metrics_scrapes_total"] != 0 {
		t.Errorf("a new exposition starts at %v scrapes", v2["edgeq_metrics_scrapes_total"])
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func round(v any) any {
	if f, ok := v.(float64); ok {
		return float64(int64(f*100+0.5)) / 100
	}
	return v
}
