package wal

import (
	"strconv"

	"edgeq/gateway/metrics"
)

// WriteMetrics writes the log's families from st: the log as a whole, each
// partition (labelled by number), its fsync times, and the node-wide commit
// schedule. Refusals (st.Rejected) belong to the ingest families, which
// the node's ingest writes.
func WriteMetrics(w *metrics.Writer, st *Stats) {
	e := w.With(MetricsHelp)
	e.Gauge("edgeq_log_bytes", uint64(max(st.Bytes, 0)))
	e.Gauge("edgeq_log_max_bytes", uint64(max(st.MaxBytes, 0)))
	e.Gauge("edgeq_log_full", metrics.Bool(st.Full))
	e.Gauge("edgeq_log_disk_free_bytes", uint64(max(st.DiskFree, 0)))
	e.Gauge("edgeq_log_disk_min_free_bytes", uint64(max(st.MinFree, 0)))
	e.Gauge("edgeq_log_disk_low", metrics.Bool(st.DiskLow))
	e.Gauge("edgeq_log_disk_failing", metrics.Bool(st.DiskFault != ""))
	e.Gauge("edgeq_log_devices", uint64(max(st.Devices, 0)))
	e.Gauge("edgeq_log_max_devices", uint64(max(st.MaxDevices, 0)))
	if len(st.Partitions) == 0 {
		return
	}
	parts := make([]string, len(st.Partitions))
	for i, p := range st.Partitions {
		parts[i] = strconv.Itoa(p.Partition)
	}
	for _, f := range partitionFamilies {
		e.Family(f.name, f.typ)
		for i := range st.Partitions {
			e.Uint(f.name, f.v(&st.Partitions[i]), "partition", parts[i])
		}
	}
	e.Family("edgeq_log_fsync_duration_seconds", metrics.Histogram)
	for i := range st.Partitions {
		e.Hist("edgeq_log_fsync_duration_seconds", st.Partitions[i].FsyncLatency, "partition", parts[i])
	}
	writeCommitMetrics(&e, &st.Commit)
}

// partitionFamilies are the per-partition families, in the order written.
var partitionFamilies = []struct {
	name string
	typ  metrics.Type
	v    func(*PartitionStats) uint64
}{
	{"edgeq_log_partition_hot", metrics.Gauge, func(p *PartitionStats) uint64 { return metrics.Bool(p.Hot) }},
	{"edgeq_log_partition_bytes", metrics.Gauge, func(p *PartitionStats) uint64 { return uint64(max(p.Bytes, 0)) }},
	{"edgeq_log_partition_first_offset", metrics.Gauge, func(p *PartitionStats) uint64 { return p.First }},
	{"edgeq_log_partition_last_offset", metrics.Gauge, func(p *PartitionStats) uint64 { return p.Last }},
	{"edgeq_log_partition_durable_offset", metrics.Gauge, func(p *PartitionStats) uint64 { return p.Durable }},
	{"edgeq_log_partition_queued_appends", metrics.Gauge, func(p *PartitionStats) uint64 { return uint64(max(p.QueuedAppends, 0)) }},
	{"edgeq_log_appends_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Appends }},
	{"edgeq_log_append_bytes_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.AppendBytes }},
	{"edgeq_log_batches_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Batches }},
	{"edgeq_log_fsyncs_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Fsyncs }},
	{"edgeq_log_write_errors_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.WriteErrors }},
	{"edgeq_log_repairs_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Repairs }},
	{"edgeq_log_corrupt_records_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Corrupt }},
	{"edgeq_log_retention_dropped_records_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.Dropped }},
	{"edgeq_log_retention_dropped_bytes_total", metrics.Counter, func(p *PartitionStats) uint64 { return p.DroppedBytes }},
}

// writeCommitMetrics writes the node-wide commit schedule.
func writeCommitMetrics(e *metrics.Writer, c *CommitStats) {
	e.Counter("edgeq_wal_fsyncs_total", c.Fsyncs)
	e.Counter("edgeq_wal_written_bytes_total", c.WrittenBytes)
	e.Counter("edgeq_wal_commit_rounds_total", c.Rounds)
	e.Counter("edgeq_wal_commit_round_records_total", c.RoundRecords)
	e.Counter("edgeq_wal_commit_round_bytes_total", c.RoundBytes)
	const round = "edgeq_wal_commit_round_duration_seconds"
	e.Family(round, metrics.Histogram)
	e.Hist(round, c.RoundLatency)
}

// Collector is the log's metrics collector; stats reads the log's stats of
// the scrape (shared with the collectors that derive lag from them).
func Collector(stats func(*metrics.Writer) Stats) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		st := stats(w)
		WriteMetrics(w, &st)
	})
}

// MetricsHelp is the HELP text of the log's families.
var MetricsHelp = metrics.Help{
	"edgeq_log_bytes":                           "Bytes the log takes on disk, all partitions.",
	"edgeq_log_max_bytes":                       "The log's disk budget (storage max_bytes) in bytes.",
	"edgeq_log_full":                            "Whether the log is full (1): its budget or the disk is exhausted.",
	"edgeq_log_devices":                         "Devices in the log's per-device sequence table.",
	"edgeq_log_max_devices":                     "Limit of the log's per-device sequence table.",
	"edgeq_log_partition_hot":                   "Whether the partition is a hot-device isolation partition (1).",
	"edgeq_log_partition_bytes":                 "Bytes one partition takes on disk.",
	"edgeq_log_partition_first_offset":          "First offset still stored in the partition.",
	"edgeq_log_partition_last_offset":           "Last offset written to the partition.",
	"edgeq_log_partition_durable_offset":        "Highest offset of the partition that is durable; consumers see records up to it.",
	"edgeq_log_partition_queued_appends":        "Appends queued for the partition's next group commit.",
	"edgeq_log_appends_total":                   "Records appended to the partition.",
	"edgeq_log_append_bytes_total":              "Bytes appended to the partition, record encoding included.",
	"edgeq_log_batches_total":                   "Group-commit batches written to the partition.",
	"edgeq_log_fsyncs_total":                    "Fsyncs of the partition's log.",
	"edgeq_log_write_errors_total":              "Failed writes or fsyncs of the partition; each makes it reopen and repair.",
	"edgeq_log_repairs_total":                   "Torn or corrupt tails of the partition repaired by truncation.",
	"edgeq_log_corrupt_records_total":           "Records of the partition skipped because their CRC failed.",
	"edgeq_log_retention_dropped_records_total": "Records of the partition removed by retention before every group committed them.",
	"edgeq_log_retention_dropped_bytes_total":   "Bytes of the partition removed by retention before every group committed them.",
	"edgeq_log_fsync_duration_seconds":          "Time one fsync of the partition's log took.",
	"edgeq_wal_commit_round_bytes_total":        "Bytes made durable by commit rounds.",
	"edgeq_wal_commit_round_duration_seconds":   "Wall time of one commit round: its fsyncs, some of them in parallel.",
	"edgeq_wal_commit_round_records_total":      "Records made durable by commit rounds; divided by the rounds, the mean round size.",
	"edgeq_wal_commit_rounds_total":             "Group-commit rounds: each one fsyncs every partition with unsynced appends, then acknowledges them.",
	"edgeq_wal_fsyncs_total":                    "fsync calls on the log's segment files (all partitions together) and its offsets journal.",
	"edgeq_wal_written_bytes_total":             "Bytes the log wrote to the OS (page cache), all partitions together, rewrites after a write error included.",
	"edgeq_log_disk_failing":                    "1 while writes to the data directory fail (EIO, EROFS, ENOSPC); /readyz says why.",
	"edgeq_log_disk_free_bytes":                 "Free bytes of the data directory's file system, as last checked.",
	"edgeq_log_disk_low":                        "1 while free space is below the watermark (wal.min_free_bytes / min_free_percent): publishes are refused or the oldest data dropped, by full_policy.",
	"edgeq_log_disk_min_free_bytes":             "The free-space watermark in bytes.",
}
