package devicemetrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmokeRealMachine runs every collector on this machine's /proc and /sys
// and checks only structure and invariants, never specific values.
func TestSmokeRealMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no procfs here: %v", err)
	}
	cs, err := NewCollectors(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	errs := map[string]error{}
	got := CollectAllWithErrors(cs, nil, func(c string, err error) { errs[c] = err })
	assertContiguousNames(t, got)

	// The disk collector legitimately fails where the temp dir has no block
	// device (overlayfs, tmpfs); everything else must work on any Linux.
	for c, err := range errs {
		if c == "disk" {
			t.Logf("disk collector failed here (expected on overlayfs/tmpfs): %v", err)
			continue
		}
		t.Errorf("collector %s failed on the real machine: %v", c, err)
	}

	one := func(name string) float64 {
		t.Helper()
		s := named(got, name)
		if len(s) != 1 {
			t.Fatalf("%s: %d samples, want 1", name, len(s))
		}
		return s[0].Value
	}
	if rss := one("edgeq_process_resident_memory_bytes"); rss <= 0 {
		t.Errorf("RSS = %v, want > 0", rss)
	}
	if open, limit := one("edgeq_process_open_fds"), one("edgeq_process_max_fds"); open < 1 || open > limit {
		t.Errorf("open fds %v, limit %v: want 1 <= open <= limit", open, limit)
	}
	if avail, total := one("edgeq_device_memory_available_bytes"), one("edgeq_device_memory_total_bytes"); avail <= 0 || avail > total {
		t.Errorf("memory available %v of total %v", avail, total)
	}
	if up := one("edgeq_device_uptime_seconds"); up <= 0 {
		t.Errorf("uptime = %v, want > 0", up)
	}
	if n := one(cpusOnlineName); n < 1 {
		t.Errorf("cpus online = %v", n)
	}
	if cpu := named(got, cpuSecondsName); len(cpu) != 8 {
		t.Errorf("%d cpu mode samples, want 8", len(cpu))
	}
	size, free, avail := one("edgeq_device_filesystem_size_bytes"), one("edgeq_device_filesystem_free_bytes"), one("edgeq_device_filesystem_avail_bytes")
	if size <= 0 || free > size || avail > free {
		t.Errorf("filesystem size %v free %v avail %v: want 0 < size, avail <= free <= size", size, free, avail)
	}
	if n := len(named(got, rxBytesName)); n > DefaultConfig().MaxInterfaces {
		t.Errorf("%d interfaces reported, above the limit", n)
	}

	for _, s := range named(got, "edgeq_device_disk_written_bytes_total") {
		dev, _ := s.Label("device")
		t.Logf("data dir disk %s: %v bytes written", dev, s.Value)
	}

	// A temperature is only ever 0 when the kernel file says 0.
	temps := named(got, temperatureName)
	t.Logf("%d thermal zones reported", len(temps))
	for _, s := range temps {
		zone, _ := s.Label("zone")
		if s.Value != 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/sys/class/thermal", "thermal_zone"+zone, "temp"))
		if err != nil || strings.TrimSpace(string(raw)) != "0" {
			t.Errorf("zone %s reported 0 °C but its temp file says %q (%v)", zone, raw, err)
		}
	}
}
