package metrics

import (
	"io"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"edgeq/internal/hist"
)

// Collector writes one component's families at scrape time, as
// node_exporter's collectors do: the component knows its counters and
// their help text; this package knows only the text format. Collect must
// write each family it owns once, all its series together, and must not
// block on the component's hot path for longer than a copy.
type Collector interface {
	Collect(w *Writer)
}

// CollectorFunc is a function as a Collector.
type CollectorFunc func(w *Writer)

// Collect calls f(w).
func (f CollectorFunc) Collect(w *Writer) { f(w) }

// Shared is a value several collectors of one scrape need (the log's
// stats, the queue groups' stats): read once per scrape, by the first
// collector that asks, so that every family of the scrape tells of the
// same moment.
type Shared[T any] struct {
	read func() T
}

// NewShared returns a Shared value read by read.
func NewShared[T any](read func() T) *Shared[T] { return &Shared[T]{read: read} }

// Get returns the value of this scrape, reading it on the first call.
func (s *Shared[T]) Get(w *Writer) T {
	if v, ok := w.shared[s]; ok {
		return v.(T)
	}
	v := s.read()
	if w.shared == nil {
		w.shared = map[any]any{}
	}
	w.shared[s] = v
	return v
}

// ScrapeBuckets are the upper bounds of the scrape-duration histogram: a
// scrape should take well under 5 ms.
var ScrapeBuckets = []time.Duration{
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, time.Second,
}

// Registry is a node's whole /metrics page: its collectors in the order
// they were given, then the Go runtime's metrics and the counters about
// scraping itself, which each Registry owns (two nodes in one test process
// do not share them).
type Registry struct {
	collectors []Collector

	// GoRuntime adds a few go_* gauges and counters of the Go runtime
	// (goroutines, heap, GC cycles), read from runtime/metrics without
	// stopping the world.
	GoRuntime bool

	scrapes  atomic.Uint64
	duration *hist.Histogram
}

// NewRegistry returns a registry of the collectors, written in this order,
// with the Go runtime metrics on.
func NewRegistry(cs ...Collector) *Registry {
	return &Registry{collectors: cs, GoRuntime: true, duration: hist.New(ScrapeBuckets)}
}

// Write runs every collector at now, then writes the Go runtime metrics and
// the scrape counters. Give it a buffer.
func (r *Registry) Write(out io.Writer, now time.Time) {
	w := NewWriter(out, now)
	for _, c := range r.collectors {
		c.Collect(w)
	}
	e := w.With(help)
	if r.GoRuntime {
		writeGoRuntime(&e)
	}
	const dur = "edgeq_metrics_scrape_duration_seconds"
	e.Family(dur, Histogram)
	e.Hist(dur, r.duration.Snapshot())
	e.Counter("edgeq_metrics_scrapes_total", r.scrapes.Load())
}

// Observe counts one scrape that took d, gathering and rendering included.
// It shows in the next scrape.
func (r *Registry) Observe(d time.Duration) {
	r.scrapes.Add(1)
	r.duration.Observe(d)
}

// goRuntime maps runtime/metrics samples to exposed names.
var goRuntime = []struct {
	sample, name string
	typ          Type
}{
	{"/sched/goroutines:goroutines", "go_goroutines", Gauge},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", Gauge},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", Gauge},
	{"/gc/heap/goal:bytes", "go_gc_heap_goal_bytes", Gauge},
	{"/gc/cycles/total:gc-cycles", "go_gc_cycles_total", Counter},
}

func writeGoRuntime(w *Writer) {
	samples := make([]metrics.Sample, len(goRuntime))
	for i, g := range goRuntime {
		samples[i].Name = g.sample
	}
	metrics.Read(samples)
	for i, g := range goRuntime {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			continue // not in this Go version
		}
		w.Family(g.name, g.typ)
		w.Uint(g.name, samples[i].Value.Uint64())
	}
}

// NodeInfo is the node's identity and state: edgeq_node_info, _ready and
// _start_time_seconds.
type NodeInfo struct {
	Node, Version string
	Start         time.Time
	Ready         func() bool
}

// Collect writes the node's families.
func (n NodeInfo) Collect(w *Writer) {
	e := w.With(help)
	e.Family("edgeq_node_info", Gauge)
	e.Uint("edgeq_node_info", 1, "node", n.Node, "version", n.Version)
	e.Gauge("edgeq_node_ready", Bool(n.Ready != nil && n.Ready()))
	e.GaugeFloat("edgeq_node_start_time_seconds", UnixSeconds(n.Start))
}
