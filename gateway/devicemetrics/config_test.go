package devicemetrics

import (
	"errors"
	"slices"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "zero value means defaults", cfg: Config{}},
		{name: "defaults", cfg: DefaultConfig()},
		{name: "explicit pid and limits", cfg: Config{PID: 1, MaxInterfaces: 4, MaxThermalZones: 1024}},
		{name: "negative pid", cfg: Config{PID: -1}, wantErr: true},
		{name: "negative interfaces", cfg: Config{MaxInterfaces: -1}, wantErr: true},
		{name: "too many interfaces", cfg: Config{MaxInterfaces: 1025}, wantErr: true},
		{name: "negative zones", cfg: Config{MaxThermalZones: -3}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr != (err != nil) {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want it to wrap ErrInvalidConfig", err)
			}
			cs, err := NewCollectors(tt.cfg)
			if tt.wantErr != (err != nil) || (err == nil && len(cs) == 0) {
				t.Fatalf("NewCollectors() = %d collectors, %v", len(cs), err)
			}
		})
	}
}

func TestNewCollectorsNamesAndOrder(t *testing.T) {
	names := func(cs []Collector) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name())
		}
		return out
	}
	withoutDataDir, err := NewCollectors(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(withoutDataDir), allCollectorNames()[:7]; !slices.Equal(got, want) {
		t.Errorf("without DataDir: %v, want %v", got, want)
	}
	withDataDir, err := NewCollectors(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(withDataDir), allCollectorNames(); !slices.Equal(got, want) {
		t.Errorf("with DataDir: %v, want %v", got, want)
	}
}

func TestWithDefaultsKeepsExplicitValues(t *testing.T) {
	got := Config{ProcRoot: "/host/proc", MaxInterfaces: 3}.withDefaults()
	want := Config{ProcRoot: "/host/proc", SysRoot: "/sys", MaxInterfaces: 3, MaxThermalZones: 32}
	if got != want {
		t.Fatalf("withDefaults() = %+v, want %+v", got, want)
	}
}
