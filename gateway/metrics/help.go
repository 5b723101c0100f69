package metrics

// help is the HELP text of the families this package writes itself: the
// node's identity, the Go runtime and the scrapes. Every component keeps
// the text of its own families next to the code that writes them (a
// MetricsHelp table in its package).
var help = Help{
	"edgeq_node_info":                       "Always 1; labels name this node and its edgeq version.",
	"edgeq_node_ready":                      "Whether the node has started (1): storage open, listeners and bridges up, as /readyz reports.",
	"edgeq_node_start_time_seconds":         "Unix time the node started, in seconds.",
	"edgeq_metrics_scrapes_total":           "Scrapes of /metrics served.",
	"edgeq_metrics_scrape_duration_seconds": "Time to gather and render /metrics, from the snapshot to the rendered page.",
	"go_goroutines":                         "Goroutines that currently exist.",
	"go_memstats_heap_alloc_bytes":          "Bytes of allocated heap objects (runtime/metrics /memory/classes/heap/objects:bytes).",
	"go_memstats_sys_bytes":                 "Bytes of memory the Go runtime obtained from the OS (runtime/metrics /memory/classes/total:bytes).",
	"go_gc_heap_goal_bytes":                 "Heap size the Go garbage collector aims to stay below.",
	"go_gc_cycles_total":                    "Completed Go garbage-collection cycles.",
}
