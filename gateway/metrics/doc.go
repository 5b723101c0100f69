// Package metrics renders an edgeq node's /metrics page in the Prometheus
// text format through github.com/VictoriaMetrics/metrics, and derives the
// device health of /v1/status from the same device samples.
//
// The node gathers a Snapshot (copies of counters, positions and histogram
// snapshots; see gateway/metrics.go) and Render writes it. Render is a pure
// function of the Snapshot: it takes no locks and reads nothing live, so
// formatting a large page never holds up ingest or delivery, and tests render
// fixed snapshots byte for byte.
//
// Every series whose labels change at run time (per partition, per queue
// group, per bridge, the top devices, the device metrics) is written at
// scrape time: single-series families with the library's Write* helpers,
// multi-series ones with WriteMetadataIfNeeded once per family and one line
// per series. The library's ExposeMetadata(true) is on, so every family has
// its HELP and TYPE lines (the library writes HELP without a text).
// Counters that only this package owns (scrapes, render time) live in a
// metrics.Set; see Exposition.
//
// Cardinality is bounded by configuration, never by traffic: partitions,
// queue groups (queue.max_groups), bridges and their fixed reason sets,
// cluster peers (the peer manager's limit of 64) and, per group, the nodes
// with members of it, network interfaces and thermal zones (bounded in
// devicemetrics), at most metrics.top_devices device IDs, and the
// configured Modbus devices (at most 247 per bus and 32 buses). No other
// series carries a device ID.
package metrics
