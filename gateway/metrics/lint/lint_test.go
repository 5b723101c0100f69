package lint

import (
	"strings"
	"testing"
)

// TestCheck: a clean exposition passes, and each broken one is caught for
// the right reason.
func TestCheck(t *testing.T) {
	const okHist = `# HELP h_seconds
# TYPE h_seconds histogram
h_seconds_bucket{g="a",le="0.1"} 1
h_seconds_bucket{g="a",le="1"} 3
h_seconds_bucket{g="a",le="+Inf"} 4
h_seconds_sum{g="a"} 2.5
h_seconds_count{g="a"} 4
`
	tests := []struct {
		name string
		text string
		want string // substring of a problem; empty: clean
	}{
		{"clean", "# HELP edgeq_x_total Things.\n# TYPE edgeq_x_total counter\nedgeq_x_total{a=\"1\"} 3\nedgeq_x_total{a=\"2\"} 4\n" + okHist, ""},
		{"help without text is present", "# HELP g\n# TYPE g gauge\ng 1\n", ""},
		{"escaped label values", "# HELP g\n# TYPE g gauge\ng{a=\"q\\\"b\\\\n\\n\"} 1\n", ""},
		{"no help", "# TYPE g gauge\ng 1\n", "g: no HELP line"},
		{"no type", "# HELP g\ng 1\n", "g: no TYPE line"},
		{"no metadata at all", "g 1\n", "outside the block"},
		{"second help", "# HELP g\n# HELP g\n# TYPE g gauge\ng 1\n", "second HELP"},
		{"type after samples", "# HELP g\ng 1\n# TYPE g gauge\n", "after its samples"},
		{"split family", "# HELP a\n# TYPE a gauge\na{x=\"1\"} 1\n# HELP b\n# TYPE b gauge\nb 1\na{x=\"2\"} 2\n", "outside the block"},
		{"family reopened", "# HELP a\n# TYPE a gauge\na 1\n# HELP b\n# TYPE b gauge\nb 1\n# HELP a\n", "continues after another family"},
		{"duplicate series", "# HELP g\n# TYPE g gauge\ng{a=\"1\",b=\"2\"} 1\ng{b=\"2\",a=\"1\"} 2\n", "duplicate series"},
		{"bad metric name", "# HELP 1g\n# TYPE 1g gauge\n1g 1\n", "expfmt"},
		{"bad label name", "# HELP g\n# TYPE g gauge\ng{a-b=\"1\"} 1\n", "expfmt"},
		{"reserved label name", "# HELP g\n# TYPE g gauge\ng{__x=\"1\"} 1\n", "reserved"},
		{"label twice", "# HELP g\n# TYPE g gauge\ng{a=\"1\",a=\"2\"} 1\n", "duplicate label names"},
		{"unparsable value", "# HELP g\n# TYPE g gauge\ng one\n", "expfmt"},
		{"buckets not cumulative", strings.Replace(okHist, `le="1"} 3`, `le="1"} 0`, 1), "cumulative"},
		{"no +Inf bucket", strings.Replace(okHist, "h_seconds_bucket{g=\"a\",le=\"+Inf\"} 4\n", "", 1), "+Inf"},
		{"count differs from +Inf", strings.Replace(okHist, `_count{g="a"} 4`, `_count{g="a"} 5`, 1), "_count 5"},
		{"no sum", strings.Replace(okHist, "h_seconds_sum{g=\"a\"} 2.5\n", "", 1), "without _sum"},
		{"bounds not ascending", strings.Replace(okHist, `le="1"} 3`, `le="0.05"} 3`, 1), "strictly ascending"},
		{"bucket twice", strings.Replace(okHist, `h_seconds_bucket{g="a",le="1"} 3`, "h_seconds_bucket{g=\"a\",le=\"1\"} 3\nh_seconds_bucket{g=\"a\",le=\"1\"} 3", 1), "strictly ascending"},
		{"counter without _total", "# HELP edgeq_x\n# TYPE edgeq_x counter\nedgeq_x 1\n", "only counters end in _total"},
		{"gauge with _total", "# HELP edgeq_x_total\n# TYPE edgeq_x_total gauge\nedgeq_x_total 1\n", "only counters end in _total"},
		{"policy only on its prefix", "# HELP go_x_count\n# TYPE go_x_count counter\ngo_x_count 1\n", ""},
		{"name clash with counter", "# HELP x\n# TYPE x gauge\nx 1\n# HELP x_total\n# TYPE x_total counter\nx_total 1\n", "without its _total"},
		{"histogram series after the histogram", okHist + "# HELP h_seconds_count\n# TYPE h_seconds_count gauge\nh_seconds_count 1\n", "expfmt"},
		{"name clash with histogram", "# HELP h_seconds_count\n# TYPE h_seconds_count gauge\nh_seconds_count 1\n" + okHist, "named like a series"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Check([]byte(tt.text), Policy{Prefix: "edgeq_"})
			if tt.want == "" {
				if err := r.Err(); err != nil {
					t.Fatalf("clean exposition flagged: %v", err)
				}
				if r.Families == 0 || r.Series == 0 {
					t.Fatalf("counted %d families, %d series", r.Families, r.Series)
				}
				return
			}
			for _, p := range r.Problems {
				if strings.Contains(p, tt.want) {
					return
				}
			}
			t.Fatalf("want a problem containing %q, got %q", tt.want, r.Problems)
		})
	}
}
