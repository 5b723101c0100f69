package devicemetrics

import (
	"math"
	"testing"
)

func TestSampleString(t *testing.T) {
	tests := []struct {
		name string
		s    Sample
		want string
	}{
		{"no labels", gauge("m", "h", 1.5), "m 1.5"},
		{"labels in order", counter("m_total", "h", 3, Label{"b", "x"}, Label{"a", "y"}), `m_total{b="x",a="y"} 3`},
		{"quotes escaped", gauge("m", "h", 0, Label{"type", `a"b\c`}), `m{type="a\"b\\c"} 0`},
		{"negative", gauge("m", "h", -5.25), "m -5.25"},
		{"integer below 1e15 in full", gauge("m", "h", 3977408512), "m 3977408512"},
		{"integer from 1e15 in exponent form", gauge("m", "h", 18446744073709551615), "m 1.8446744073709552e+19"},
		{"NaN", gauge("m", "h", math.NaN()), "m NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMetricTypeString(t *testing.T) {
	for typ, want := range map[MetricType]string{Gauge: "gauge", Counter: "counter", 0: "untyped"} {
		if got := typ.String(); got != want {
			t.Errorf("MetricType(%d).String() = %q, want %q", typ, got, want)
		}
	}
}
