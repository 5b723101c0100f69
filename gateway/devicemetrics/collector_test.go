package devicemetrics

import (
	"errors"
	"strings"
	"testing"
)

// fakeCollector appends n samples (value i) and then behaves as told.
type fakeCollector struct {
	name    string
	n       int
	err     error
	panics  bool
	shrinks bool // returns fewer samples than it was given
}

func (f fakeCollector) Name() string { return f.name }

func (f fakeCollector) Collect(dst []Sample) ([]Sample, error) {
	for i := range f.n {
		dst = append(dst, gauge("fake_"+f.name, "h", float64(i)))
	}
	if f.panics {
		var m map[string]int
		m["boom"]++ // a real runtime panic: assignment to entry in nil map
	}
	if f.shrinks {
		return dst[:0], nil
	}
	return dst, f.err
}

func TestCollectAll(t *testing.T) {
	previous := gauge("previous", "h", 7)
	tests := []struct {
		name       string
		collectors []Collector
		want       string
		wantErrs   []string // collectors reported to onError, in order
	}{
		{
			name:       "all succeed, successes last in collector order",
			collectors: []Collector{fakeCollector{name: "a", n: 2}, fakeCollector{name: "b", n: 1}},
			want: `gauge previous 7
gauge fake_a 0
gauge fake_a 1
gauge fake_b 0
gauge edgeq_collector_success{collector="a"} 1
gauge edgeq_collector_success{collector="b"} 1
`,
		},
		{
			name:       "error drops the partial samples and reports 0",
			collectors: []Collector{fakeCollector{name: "bad", n: 3, err: errors.New("read failed")}, fakeCollector{name: "good", n: 1}},
			want: `gauge previous 7
gauge fake_good 0
gauge edgeq_collector_success{collector="bad"} 0
gauge edgeq_collector_success{collector="good"} 1
`,
			wantErrs: []string{"bad"},
		},
		{
			name:       "panic is recovered and counts as failure",
			collectors: []Collector{fakeCollector{name: "good", n: 1}, fakeCollector{name: "panicky", n: 2, panics: true}, fakeCollector{name: "after", n: 1}},
			want: `gauge previous 7
gauge fake_good 0
gauge fake_after 0
gauge edgeq_collector_success{collector="good"} 1
gauge edgeq_collector_success{collector="panicky"} 0
gauge edgeq_collector_success{collector="after"} 1
`,
			wantErrs: []string{"panicky"},
		},
		{
			name:       "a collector that drops earlier samples fails and they are kept",
			collectors: []Collector{fakeCollector{name: "shrinker", n: 1, shrinks: true}},
			want: `gauge previous 7
gauge edgeq_collector_success{collector="shrinker"} 0
`,
			wantErrs: []string{"shrinker"},
		},
		{
			name:       "nil collectors are skipped",
			collectors: []Collector{nil, fakeCollector{name: "a", n: 0}, nil},
			want: `gauge previous 7
gauge edgeq_collector_success{collector="a"} 1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failed []string
			var panicErr error
			got := CollectAllWithErrors(tt.collectors, []Sample{previous}, func(c string, err error) {
				failed = append(failed, c)
				if errors.Is(err, ErrCollectorPanic) {
					panicErr = err
				}
			})
			assertRendered(t, got, tt.want)
			if strings.Join(failed, ",") != strings.Join(tt.wantErrs, ",") {
				t.Errorf("onError called for %v, want %v", failed, tt.wantErrs)
			}
			if panicErr != nil && !strings.Contains(panicErr.Error(), "nil map") {
				t.Errorf("panic error %q does not carry the panic value", panicErr)
			}
			// CollectAll is the same without the callback.
			assertRendered(t, CollectAll(tt.collectors, []Sample{previous}), tt.want)
		})
	}
}

func TestCollectAllPanicIsReportedAsPanic(t *testing.T) {
	var got error
	CollectAllWithErrors([]Collector{fakeCollector{name: "p", panics: true}}, nil, func(_ string, err error) { got = err })
	if !errors.Is(got, ErrCollectorPanic) {
		t.Fatalf("error = %v, want ErrCollectorPanic", got)
	}
}
