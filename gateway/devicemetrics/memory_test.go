package devicemetrics

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryCollectorOnFixture(t *testing.T) {
	// testdata/proc/meminfo: MemTotal 3884188 kB, MemAvailable 3178504 kB.
	got := collectOK(t, memoryCollector{procRoot: fixtureProc})
	assertRendered(t, got, `gauge edgeq_device_memory_total_bytes 3977408512
gauge edgeq_device_memory_available_bytes 3254788096
`)
}

func TestMemoryCollectorLeavesOutMissingFields(t *testing.T) {
	tests := []struct {
		name    string
		meminfo string
		want    string
		wantErr error
	}{
		{
			name:    "kernel before 3.14 has no MemAvailable",
			meminfo: "MemTotal:        1024 kB\nMemFree:          512 kB\n",
			want:    "gauge edgeq_device_memory_total_bytes 1048576\n",
		},
		{
			name:    "neither field is an error, not an empty success",
			meminfo: "MemFree:          512 kB\n",
			wantErr: errNoMemoryFields,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "meminfo"), []byte(tt.meminfo), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := memoryCollector{procRoot: root}.Collect(nil)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertRendered(t, got, tt.want)
		})
	}
}
