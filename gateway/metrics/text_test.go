package metrics

import (
	"bytes"
	"math"
	"testing"
	"time"

	"edgeq/internal/hist"
)

// TestHist: a hist.Snapshot (per-bucket counts, last +Inf) becomes
// cumulative le buckets in seconds, +Inf, _sum in seconds and _count equal
// to the +Inf bucket, also for snapshots that are empty or short.
func TestHist(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		s    hist.Snapshot
		want string
	}{
		{"cumulative", hist.Snapshot{Bounds: []time.Duration{ms, 25 * ms, 5 * time.Second}, Counts: []uint64{3, 0, 4, 2}, Sum: 1500 * ms},
			`h_bucket{g="a",le="0.001"} 3
h_bucket{g="a",le="0.025"} 3
h_bucket{g="a",le="5"} 7
h_bucket{g="a",le="+Inf"} 9
h_sum{g="a"} 1.5
h_count{g="a"} 9
`},
		{"empty", hist.Snapshot{Bounds: []time.Duration{ms}, Counts: []uint64{0, 0}},
			`h_bucket{g="a",le="0.001"} 0
h_bucket{g="a",le="+Inf"} 0
h_sum{g="a"} 0
h_count{g="a"} 0
`},
		{"never snapshotted", hist.Snapshot{},
			`h_bucket{g="a",le="+Inf"} 0
h_sum{g="a"} 0
h_count{g="a"} 0
`},
		{"counts shorter than bounds", hist.Snapshot{Bounds: []time.Duration{ms, 2 * ms}, Counts: []uint64{5}},
			`h_bucket{g="a",le="0.001"} 5
h_bucket{g="a",le="0.002"} 5
h_bucket{g="a",le="+Inf"} 5
h_sum{g="a"} 0
h_count{g="a"} 5
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			NewWriter(&b, time.Time{}).Hist("h", tt.s, "g", "a")
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestAppendLabelAndFloat(t *testing.T) {
	labels := []struct{ value, want string }{
		{"plain", `l="plain"`},
		{`q"uote`, `l="q\"uote"`},
		{`back\slash`, `l="back\\slash"`},
		{"line\nfeed", `l="line\nfeed"`},
		{"tab\tand ünïcode", "l=\"tab\tand ünïcode\""},
		{"", `l=""`},
	}
	for _, tt := range labels {
		if got := string(appendLabel(nil, "l", tt.value)); got != tt.want {
			t.Errorf("label %q: got %s, want %s", tt.value, got, tt.want)
		}
	}
	floats := []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{3977408512, "3977408512"},
		{-5.25, "-5.25"},
		{0.001, "0.001"},
		{1e20, "1e+20"},
		{1.5e-9, "1.5e-09"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
	}
	for _, tt := range floats {
		if got := string(appendFloat(nil, tt.v)); got != tt.want {
			t.Errorf("float %v: got %s, want %s", tt.v, got, tt.want)
		}
	}
}

// TestHelpEscaped: HELP text escapes the backslash and the line feed, as
// the text format asks.
func TestHelpEscaped(t *testing.T) {
	got := string(appendMeta(nil, "x", "a\\b\nc", string(Gauge)))
	if want := "# HELP x a\\\\b\\nc\n# TYPE x gauge\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := string(appendMeta(nil, "x", "", string(Counter))), "# HELP x\n# TYPE x counter\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
