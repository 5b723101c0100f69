package devicemetrics

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMilliCelsius(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		wantErr bool
	}{
		{text: "48312", want: 48.312},
		{text: "48312\n", want: 48.312},
		{text: "-5250", want: -5.25},
		{text: "0", want: 0}, // the file says 0: a real reading
		{text: "-273150", want: -273.15},
		{text: "-274000", wantErr: true}, // THERMAL_TEMP_INVALID
		{text: "", wantErr: true},
		{text: "  \n", wantErr: true},
		{text: "48.3", wantErr: true},
		{text: "N/A", wantErr: true},
		{text: "99999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := parseMilliCelsius(tt.text)
			if tt.wantErr {
				if !errors.Is(err, errInvalidTemperature) {
					t.Fatalf("parseMilliCelsius(%q) err = %v, want errInvalidTemperature", tt.text, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseMilliCelsius(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
			}
		})
	}
}

func TestThermalZoneNumber(t *testing.T) {
	tests := []struct {
		name   string
		want   int
		wantOK bool
	}{
		{"thermal_zone0", 0, true},
		{"thermal_zone10", 10, true},
		{"cooling_device0", 0, false},
		{"thermal_zone", 0, false},
		{"thermal_zone01", 0, false},
		{"thermal_zone+1", 0, false},
		{"thermal_zone-1", 0, false},
		{"thermal_zone1a", 0, false},
		{"thermal_zone99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := thermalZoneNumber(tt.name)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("thermalZoneNumber(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestThermalCollectorOnFixture(t *testing.T) {
	// testdata/sys/class/thermal: zone0 48312, zone1 without temp, zone2
	// THERMAL_TEMP_INVALID, zone3 whose temp cannot be read (a directory),
	// zone10 -5250; cooling_device0 is not a zone.
	tests := []struct {
		name     string
		maxZones int
		want     string
	}{
		{
			name: "unreadable zones are absent and counted", maxZones: 32,
			want: `gauge edgeq_device_temperature_celsius{zone="0",type="cpu-thermal"} 48.312
gauge edgeq_device_temperature_celsius{zone="10",type="outdoor-thermal"} -5.25
gauge edgeq_device_thermal_zones_omitted{reason="unreadable"} 3
gauge edgeq_device_thermal_zones_omitted{reason="limit"} 0
`,
		},
		{
			name: "limit keeps the lowest zone numbers", maxZones: 2,
			want: `gauge edgeq_device_temperature_celsius{zone="0",type="cpu-thermal"} 48.312
gauge edgeq_device_thermal_zones_omitted{reason="unreadable"} 1
gauge edgeq_device_thermal_zones_omitted{reason="limit"} 3
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := collectOK(t, thermalCollector{sysRoot: fixtureSys, maxZones: tt.maxZones})
			assertRendered(t, got, tt.want)
		})
	}
}

// writeZone creates <root>/class/thermal/thermal_zone<n> with the given files;
// a nil content leaves the file out.
func writeZone(t *testing.T, root, zone string, files map[string]*string) {
	t.Helper()
	dir := filepath.Join(root, "class", "thermal", "thermal_zone"+zone)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if content == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(*content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ptr(s string) *string { return &s }

func TestThermalCollectorEdgeCases(t *testing.T) {
	t.Run("no thermal class means no zones, not a failure", func(t *testing.T) {
		got := collectOK(t, thermalCollector{sysRoot: t.TempDir(), maxZones: 32})
		assertRendered(t, got, `gauge edgeq_device_thermal_zones_omitted{reason="unreadable"} 0
gauge edgeq_device_thermal_zones_omitted{reason="limit"} 0
`)
	})
	t.Run("a temp file that says 0 is reported as 0", func(t *testing.T) {
		root := t.TempDir()
		writeZone(t, root, "0", map[string]*string{"type": ptr("soc\n"), "temp": ptr("0\n")})
		got := collectOK(t, thermalCollector{sysRoot: root, maxZones: 32})
		assertRendered(t, got, `gauge edgeq_device_temperature_celsius{zone="0",type="soc"} 0
gauge edgeq_device_thermal_zones_omitted{reason="unreadable"} 0
gauge edgeq_device_thermal_zones_omitted{reason="limit"} 0
`)
	})
	t.Run("missing type keeps the temperature with an empty type", func(t *testing.T) {
		root := t.TempDir()
		writeZone(t, root, "0", map[string]*string{"temp": ptr("40000")})
		got := collectOK(t, thermalCollector{sysRoot: root, maxZones: 32})
		if v, _ := got[0].Label("type"); got[0].Name != temperatureName || v != "" || got[0].Value != 40 {
			t.Fatalf("first sample = %v, want temperature 40 with type \"\"", got[0])
		}
	})
	t.Run("empty and oversized temp files are absent", func(t *testing.T) {
		root := t.TempDir()
		long := make([]byte, smallFileMax)
		for i := range long {
			long[i] = '1'
		}
		writeZone(t, root, "0", map[string]*string{"type": ptr("a"), "temp": ptr("")})
		writeZone(t, root, "1", map[string]*string{"type": ptr("b"), "temp": ptr(string(long))})
		got := collectOK(t, thermalCollector{sysRoot: root, maxZones: 32})
		assertRendered(t, got, `gauge edgeq_device_thermal_zones_omitted{reason="unreadable"} 2
gauge edgeq_device_thermal_zones_omitted{reason="limit"} 0
`)
	})
	t.Run("a FIFO as temp neither hangs nor reports 0", func(t *testing.T) {
		root := t.TempDir()
		writeZone(t, root, "0", map[string]*string{"type": ptr("a")})
		if err := unix.Mkfifo(filepath.Join(root, "class", "thermal", "thermal_zone0", "temp"), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		got := collectOK(t, thermalCollector{sysRoot: root, maxZones: 32})
		if len(named(got, temperatureName)) != 0 {
			t.Fatalf("got a temperature from a FIFO: %v", got)
		}
	})
	t.Run("missing sysfs root fails", func(t *testing.T) {
		if _, err := (thermalCollector{sysRoot: filepath.Join(t.TempDir(), "nope"), maxZones: 32}).Collect(nil); err == nil {
			t.Fatal("Collect on a missing sysfs root succeeded")
		}
	})
}
