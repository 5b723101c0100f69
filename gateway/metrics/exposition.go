package metrics

import (
	"io"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"edgeq/internal/hist"
)

// ScrapeBuckets are the upper bounds of the scrape-duration histogram: a
// scrape should take well under 5 ms.
var ScrapeBuckets = []time.Duration{
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, time.Second,
}

// Exposition is a node's whole /metrics page: the rendered Snapshot, the Go
// runtime's metrics, and the counters about scraping itself, which each
// Exposition owns (two nodes in one test process do not share them).
type Exposition struct {
	// GoRuntime adds a few go_* gauges and counters of the Go runtime
	// (goroutines, heap, GC cycles), read from runtime/metrics without
	// stopping the world.
	GoRuntime bool

	scrapes  atomic.Uint64
	duration *hist.Histogram
}

// NewExposition returns an exposition with the Go runtime metrics on.
func NewExposition() *Exposition {
	return &Exposition{GoRuntime: true, duration: hist.New(ScrapeBuckets)}
}

// Write renders s, then the Go runtime metrics and the scrape counters.
// Like Render, give it a buffer.
func (x *Exposition) Write(w io.Writer, s *Snapshot) {
	Render(w, s)
	e := &enc{w: w, line: make([]byte, 0, 256)}
	if x.GoRuntime {
		writeGoRuntime(e)
	}
	const dur = "edgeq_metrics_scrape_duration_seconds"
	e.family(dur, histogram)
	e.hist(dur, x.duration.Snapshot())
	e.counter1("edgeq_metrics_scrapes_total", x.scrapes.Load())
}

// Observe counts one scrape that took d, gathering and rendering included.
// It shows in the next scrape.
func (x *Exposition) Observe(d time.Duration) {
	x.scrapes.Add(1)
	x.duration.Observe(d)
}

// goRuntime maps runtime/metrics samples to exposed names.
var goRuntime = []struct{ sample, name, typ string }{
	{"/sched/goroutines:goroutines", "go_goroutines", gauge},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", gauge},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", gauge},
	{"/gc/heap/goal:bytes", "go_gc_heap_goal_bytes", gauge},
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total", counter},
}

func writeGoRuntime(e *enc) {
	samples := make([]metrics.Sample, len(goRuntime))
	for i, g := range goRuntime {
		samples[i].Name = g.sample
	}
	metrics.Read(samples)
	for i, g := range goRuntime {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			continue // not in this Go version
		}
		e.family(g.name, g.typ)
		e.u(g.name, samples[i].Value.Uint64())
	}
}
