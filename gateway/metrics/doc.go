// Package metrics writes an edgeq node's /metrics page in the Prometheus
// text format (version 0.0.4). It knows the format and nothing of the
// components: it imports none of them.
//
// Each component collects itself, as node_exporter's collectors do: its
// package has a Collector (or a WriteMetrics function of its own stats)
// that writes its families through a Writer, and a MetricsHelp table with
// the HELP text of each family it writes, next to the code that counts.
// The node registers its collectors in one list (the root package's
// metrics.go) and Registry.Write runs them in that order, then adds the Go
// runtime's metrics and the scrape counters. Values several collectors
// derive figures from (the log's and the queue groups' stats) are Shared:
// read once per scrape, so every family of a scrape tells of one moment.
//
// A collector writes from a copy of its counters: it takes no lock for
// longer than that copy, and formatting a large page never holds up ingest
// or delivery; the write functions are pure, so tests render fixed stats
// byte for byte (testdata/*.golden). A family without HELP text fails
// TestEveryFamilyHasHelp and `promtool check metrics` (TestPromtool). The
// page is written here rather than through VictoriaMetrics/metrics, which
// edgeq used before: its metadata helper writes HELP without a text
// (v1.45.0, metrics.go writeMetadata), and everything else it did for
// edgeq (a counter and a histogram of scrapes) is an atomic counter and
// internal/hist.
//
// Cardinality is bounded by configuration, never by traffic: partitions,
// queue groups (queue.max_groups), bridges and their fixed reason sets,
// cluster peers (the peer manager's limit of 64) and, per group, the nodes
// with members of it, network interfaces and thermal zones (bounded in
// devicemetrics), at most metrics.top_devices device IDs, and the
// configured Modbus devices (at most 247 per bus and 32 buses). No other
// series carries a device ID.
package metrics
