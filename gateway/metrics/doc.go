// Package metrics renders an edgeq node's /metrics page in the Prometheus
// text format (version 0.0.4), and derives the device health of /v1/status
// from the same device samples.
//
// The node gathers a Snapshot (copies of counters, positions and histogram
// snapshots; see gateway/metrics.go) and Render writes it. Render is a pure
// function of the Snapshot: it takes no locks and reads nothing live, so
// formatting a large page never holds up ingest or delivery, and tests render
// fixed snapshots byte for byte.
//
// Every family is written at scrape time by enc (text.go): HELP and TYPE
// once, then one line per series. HELP texts live in one table, help.go;
// device metrics carry theirs in devicemetrics.Sample.Help. A family without
// a text fails TestEveryFamilyHasHelp and `promtool check metrics`
// (TestPromtool). The page is written here rather than through
// VictoriaMetrics/metrics, which edgeq used before: its metadata helper
// writes HELP without a text (v1.45.0, metrics.go writeMetadata), and
// everything else it did for edgeq (a counter and a histogram of scrapes)
// is an atomic counter and internal/hist.
//
// Cardinality is bounded by configuration, never by traffic: partitions,
// queue groups (queue.max_groups), bridges and their fixed reason sets,
// cluster peers (the peer manager's limit of 64) and, per group, the nodes
// with members of it, network interfaces and thermal zones (bounded in
// devicemetrics), at most metrics.top_devices device IDs, and the
// configured Modbus devices (at most 247 per bus and 32 buses). No other
// series carries a device ID.
package metrics
