package metrics_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"edgeq/gateway/metrics"
	"edgeq/gateway/metrics/lint"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// TestLogExpositionGolden pins the log families of two partitions and the
// node-wide commit schedule, HELP texts included. Run with -update after an
// intended change and review the diff.
func TestLogExpositionGolden(t *testing.T) {
	const golden = "testdata/log.golden"
	s := richSnapshot(t, 2, 0)
	s.Log.Commit = wal.CommitStats{
		Rounds: 1000, RoundRecords: 64_000, RoundBytes: 11_000_000, Fsyncs: 1800, WrittenBytes: 11_500_000,
		RoundLatency: hist.Snapshot{Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond},
			Counts: []uint64{700, 290, 10}, Sum: 3 * time.Second},
	}
	var b bytes.Buffer
	wal.WriteMetrics(metrics.NewWriter(&b, s.Time), &s.Log)
	got := b.Bytes()
	mustLint(t, got)
	for _, help := range []string{"# HELP edgeq_wal_fsyncs_total fsync calls", "# HELP edgeq_wal_commit_round_duration_seconds Wall time"} {
		if !strings.Contains(string(got), help) {
			t.Errorf("no %q", help)
		}
	}
	v := mustValues(t, got)
	for key, want := range map[string]float64{
		lint.Key("edgeq_wal_fsyncs_total"):                                       1800,
		lint.Key("edgeq_wal_written_bytes_total"):                                11_500_000,
		lint.Key("edgeq_wal_commit_rounds_total"):                                1000,
		lint.Key("edgeq_wal_commit_round_records_total"):                         64_000,
		lint.Key("edgeq_wal_commit_round_duration_seconds_bucket", "le", "0.01"): 990,
		lint.Key("edgeq_wal_commit_round_duration_seconds_bucket", "le", "+Inf"): 1000,
		lint.Key("edgeq_wal_commit_round_duration_seconds_count"):                1000,
	} {
		if v[key] != want {
			t.Errorf("%s = %v, want %v", key, v[key], want)
		}
	}
	compareGolden(t, golden, got)
}
