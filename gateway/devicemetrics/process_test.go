package devicemetrics

import "testing"

func TestProcessCollectorOnFixture(t *testing.T) {
	// testdata/proc/4242: stat has utime 1234, stime 567 (1/100 s) and RSS
	// 3072 pages; fd/ holds 7 entries; limits has "Max open files 4096".
	want := `gauge edgeq_process_resident_memory_bytes 12582912
counter edgeq_process_cpu_seconds_total 18.01
gauge edgeq_process_open_fds 7
gauge edgeq_process_max_fds 4096
`
	tests := []struct {
		name     string
		pid      int
		pageSize int
		want     string
	}{
		{name: "explicit pid", pid: fixturePID, pageSize: 4096, want: want},
		{name: "self link", pid: 0, pageSize: 4096, want: want},
		{
			name: "16 KiB pages (Pi 5 kernel)", pid: fixturePID, pageSize: 16384,
			want: `gauge edgeq_process_resident_memory_bytes 50331648
counter edgeq_process_cpu_seconds_total 18.01
gauge edgeq_process_open_fds 7
gauge edgeq_process_max_fds 4096
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := collectOK(t, processCollector{procRoot: fixtureProc, pid: tt.pid, pageSize: tt.pageSize})
			assertRendered(t, got, tt.want)
		})
	}
}

func TestProcessCollectorUnknownPIDFails(t *testing.T) {
	if _, err := (processCollector{procRoot: fixtureProc, pid: 99999, pageSize: 4096}).Collect(nil); err == nil {
		t.Fatal("Collect for a pid without a /proc entry succeeded")
	}
}
