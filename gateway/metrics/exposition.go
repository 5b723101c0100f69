package metrics

import (
	"io"
	"runtime/metrics"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// ScrapeBuckets are the upper bounds (seconds) of the scrape-duration
// histogram: a scrape should take well under 5 ms.
var ScrapeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

// Exposition is a node's whole /metrics page: the rendered Snapshot, the Go
// runtime's metrics, and the counters about scraping itself, which this
// package owns and keeps in a metrics.Set of its own (not the library's
// global default set, so that two nodes in one test process do not share
// them).
type Exposition struct {
	// GoRuntime adds a few go_* gauges and counters of the Go runtime
	// (goroutines, heap, GC cycles), read from runtime/metrics without
	// stopping the world. Not the library's WriteGoMetrics: its runtime
	// histograms have no _sum and _count, and go_memstats_alloc_bytes sits
	// next to go_memstats_alloc_bytes_total; the linter refuses both.
	GoRuntime bool

	set      *vm.Set
	scrapes  *vm.Counter
	duration *vm.PrometheusHistogram
}

// NewExposition returns an exposition with the Go runtime metrics on.
func NewExposition() *Exposition {
	vm.ExposeMetadata(true)
	set := vm.NewSet()
	return &Exposition{
		GoRuntime: true,
		set:       set,
		scrapes:   set.NewCounter("edgeq_metrics_scrapes_total"),
		duration:  set.NewPrometheusHistogramExt("edgeq_metrics_scrape_duration_seconds", ScrapeBuckets),
	}
}

// Write renders s, then the Go runtime metrics and the scrape counters.
// Like Render, give it a buffer.
func (x *Exposition) Write(w io.Writer, s *Snapshot) {
	Render(w, s)
	if x.GoRuntime {
		writeGoRuntime(w)
	}
	x.set.WritePrometheus(w)
}

// Observe counts one scrape that took d, gathering and rendering included.
// It shows in the next scrape.
func (x *Exposition) Observe(d time.Duration) {
	x.scrapes.Inc()
	x.duration.Update(d.Seconds())
}

// goRuntime maps runtime/metrics samples to exposed names.
var goRuntime = []struct{ sample, name, typ string }{
	{"/sched/goroutines:goroutines", "go_goroutines", gauge},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", gauge},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", gauge},
	{"/gc/heap/goal:bytes", "go_gc_heap_goal_bytes", gauge},
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total", counter},
}

func writeGoRuntime(w io.Writer) {
	samples := make([]metrics.Sample, len(goRuntime))
	for i, g := range goRuntime {
		samples[i].Name = g.sample
	}
	metrics.Read(samples)
	for i, g := range goRuntime {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			continue // not in this Go version
		}
		if v := samples[i].Value.Uint64(); g.typ == counter {
			vm.WriteCounterUint64(w, g.name, v)
		} else {
			vm.WriteGaugeUint64(w, g.name, v)
		}
	}
}
