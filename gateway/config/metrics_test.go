package config

import (
	"strings"
	"testing"
)

// TestMetricsSection: defaults, file and environment overrides, and the
// values Validate refuses, each named by its key.
func TestMetricsSection(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		env     []string
		want    Metrics
		wantErr string
	}{
		{"defaults", "", nil, Metrics{ProcRoot: "/proc", SysRoot: "/sys", TopDevices: 10}, ""},
		{"file", "metrics:\n  proc_root: /host/proc\n  sys_root: /host/sys\n  top_devices: 3\n", nil,
			Metrics{ProcRoot: "/host/proc", SysRoot: "/host/sys", TopDevices: 3}, ""},
		{"environment over file", "metrics:\n  top_devices: 3\n", []string{"EDGEQ_METRICS_TOP_DEVICES=0", "EDGEQ_METRICS_PROC_ROOT=/p"},
			Metrics{ProcRoot: "/p", SysRoot: "/sys", TopDevices: 0}, ""},
		{"too many top devices", "metrics:\n  top_devices: 101\n", nil, Metrics{}, "metrics.top_devices: 101, want 0..100"},
		{"negative top devices", "metrics:\n  top_devices: -1\n", nil, Metrics{}, "metrics.top_devices: -1"},
		{"empty proc root", "metrics:\n  proc_root: \"\"\n", nil, Metrics{}, "metrics.proc_root: empty"},
		{"empty sys root", "", []string{"EDGEQ_METRICS_SYS_ROOT="}, Metrics{}, "metrics.sys_root: empty"},
		{"unknown key", "metrics:\n  top_device: 3\n", nil, Metrics{}, "metrics.top_device: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = writeFile(t, tt.yaml)
			}
			cfg, err := Load(path, tt.env, Flags{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Metrics != tt.want {
				t.Errorf("metrics %+v, want %+v", cfg.Metrics, tt.want)
			}
		})
	}
}
