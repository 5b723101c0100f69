package wal

import (
	"errors"
	"fmt"
	"time"
)

// Durability says when an append counts as durable.
type Durability string

const (
	// DurabilityAlways fsyncs every group-commit batch before acknowledging it;
	// fsync rounds run back to back.
	DurabilityAlways Durability = "always"
	// DurabilityInterval runs fsync rounds on demand: when an append waits for
	// durability, at once or within FsyncInterval (a budget of one round per
	// FsyncInterval); for records nobody waits for, within LazySync; back to
	// back under load (CommitBytes). Appends wait for their round.
	DurabilityInterval Durability = "interval"
	// DurabilityNone acknowledges once the batch is written to the OS: survives a
	// crash of edgeq (kill -9) but not a power cut.
	DurabilityNone Durability = "none"
)

// FullPolicy says what happens when the retention budget is exceeded and nothing
// more can be truncated without passing a consumer's committed offset.
type FullPolicy string

const (
	// DropOldest truncates the oldest segments anyway; the dropped records are counted.
	DropOldest FullPolicy = "drop_oldest"
	// Reject refuses new appends with ErrFull until consumers catch up.
	Reject FullPolicy = "reject"
)

// Options configure a Log. Start from DefaultOptions; Open never changes the
// caller's copy.
type Options struct {
	// Partitions is the number of normal partitions (default 8).
	Partitions int
	// HotPartitions is the number of hot-device isolation partitions (default 2).
	HotPartitions int
	// SegmentSize is the target size of one segment file in bytes (default 512 KiB).
	// The tail segment lives in RAM, so this bounds memory per partition.
	SegmentSize int
	// SegmentCache is the number of finished segments kept in RAM per partition
	// for readers that lag behind (default 1).
	SegmentCache int
	// Durability is always, interval (default) or none.
	Durability Durability
	// FsyncInterval is the round budget under DurabilityInterval below
	// CommitBytes (see there): one round per FsyncInterval on average, up to
	// 4 back to back after a quiet spell, and so about the longest an append
	// that waits for durability waits for its round to start (default 10ms).
	FsyncInterval time.Duration
	// LazySync bounds how long records nobody waits for (Record.NoWait: serial,
	// Modbus, fire-and-forget publishes) stay unsynced under
	// DurabilityInterval when no waiter starts a round: their worst-case loss
	// window on a power cut (default 1s). A reader waiting for them
	// (WaitReadable) is a waiter: they become visible within about one round.
	LazySync time.Duration
	// CommitBytes starts an fsync round under DurabilityInterval before
	// FsyncInterval has passed: once CommitBytes have been written since the
	// last round started, over all partitions; or under load, when they come
	// at CommitBytes per 10ms (or per FsyncInterval, if shorter) or faster
	// (default 16 KiB: from 1.6 MB/s, about 8,600 records/s of 150 bytes,
	// rounds run back to back). A burst of CommitBytes/4 right after a round
	// starts one too.
	CommitBytes int
	// SyncWorkers is how many partitions of one fsync round fsync at once
	// (default 4; 1: one after the other).
	SyncWorkers int
	// MaxBatch is the most records one group commit writes (default 1024).
	MaxBatch int
	// QueueDepth is the number of appends that may wait in a partition's queue
	// before Append blocks (default 4096).
	QueueDepth int
	// MaxRecordBytes is the largest encoded record accepted (default 1 MiB).
	MaxRecordBytes int
	// MaxDevices bounds the per-device table (sequence numbers, routing); appends
	// of a new device beyond it fail with ErrTooManyDevices (default 100,000).
	MaxDevices int
	// MaxBytes is the disk budget of all partitions together (default 1 GiB, 0 = none).
	MaxBytes int64
	// MaxAge removes segments whose newest record is older than this (0 = keep).
	MaxAge time.Duration
	// FullPolicy is drop_oldest (default) or reject.
	FullPolicy FullPolicy
	// MinFreeBytes and MinFreePercent are the free-space watermark of the
	// data file system (default 32 MiB, 0%; the larger applies; 0 = off):
	// below it retention frees space (committed segments, then by
	// full_policy the oldest), and appends fail with ErrDiskLow while it
	// cannot, before the file system is full.
	MinFreeBytes   int64
	MinFreePercent float64
	// RetentionInterval is how often retention runs (default 5s).
	RetentionInterval time.Duration
	// CheckpointInterval is how often the device table is checkpointed so that
	// open does not scan the whole log (default 30s).
	CheckpointInterval time.Duration
	// Now is the clock used for ingest times and retention (default time.Now).
	Now func() time.Time
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Partitions:         8,
		HotPartitions:      2,
		SegmentSize:        512 << 10,
		SegmentCache:       1,
		Durability:         DurabilityInterval,
		FsyncInterval:      10 * time.Millisecond,
		LazySync:           time.Second,
		CommitBytes:        16 << 10,
		SyncWorkers:        4,
		MaxBatch:           1024,
		QueueDepth:         4096,
		MaxRecordBytes:     1 << 20,
		MaxDevices:         100_000,
		MaxBytes:           1 << 30,
		FullPolicy:         DropOldest,
		MinFreeBytes:       32 << 20,
		RetentionInterval:  5 * time.Second,
		CheckpointInterval: 30 * time.Second,
		Now:                time.Now,
	}
}

// Validate checks the options and names the first bad one.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Partitions >= 1 && o.Partitions <= 1024, "partitions: %d, want 1..1024", o.Partitions)
	check(o.HotPartitions >= 0 && o.HotPartitions <= 64, "hot_partitions: %d, want 0..64", o.HotPartitions)
	check(o.SegmentSize >= 64<<10 && o.SegmentSize <= 64<<20, "segment_size: %s, want 64 KiB..64 MiB", sizeText(int64(o.SegmentSize)))
	check(o.SegmentCache >= 1 && o.SegmentCache <= 16, "segment_cache: %d, want 1..16", o.SegmentCache)
	switch o.Durability {
	case DurabilityAlways, DurabilityInterval, DurabilityNone:
	default:
		errs = append(errs, fmt.Errorf("durability: %q, want always, interval or none", o.Durability))
	}
	check(o.FsyncInterval > 0 || o.Durability != DurabilityInterval, "fsync_interval: %v, want > 0", o.FsyncInterval)
	check(o.LazySync > 0 || o.Durability != DurabilityInterval, "lazy_sync: %v, want > 0", o.LazySync)
	check(o.CommitBytes >= 1<<10 && o.CommitBytes <= 64<<20, "commit_bytes: %s, want 1 KiB..64 MiB", sizeText(int64(o.CommitBytes)))
	check(o.SyncWorkers >= 1 && o.SyncWorkers <= 64, "sync_workers: %d, want 1..64", o.SyncWorkers)
	check(o.MaxBatch >= 1 && o.MaxBatch <= 1<<16, "max_batch: %d, want 1..65536", o.MaxBatch)
	check(o.QueueDepth >= 1 && o.QueueDepth <= 1<<20, "queue_depth: %d, want 1..1048576", o.QueueDepth)
	check(o.MaxRecordBytes >= 1024 && o.MaxRecordBytes <= 64<<20, "max_record_bytes: %s, want 1 KiB..64 MiB", sizeText(int64(o.MaxRecordBytes)))
	check(o.MaxDevices >= 1, "max_devices: %d, want >= 1", o.MaxDevices)
	check(o.MaxBytes >= 0, "max_bytes: %s, want >= 0", sizeText(o.MaxBytes))
	check(o.MaxAge >= 0, "max_age: %v, want >= 0", o.MaxAge)
	check(o.MinFreeBytes >= 0, "min_free_bytes: %s, want >= 0", sizeText(o.MinFreeBytes))
	check(o.MinFreePercent >= 0 && o.MinFreePercent <= 90, "min_free_percent: %v, want 0..90", o.MinFreePercent)
	switch o.FullPolicy {
	case DropOldest, Reject:
	default:
		errs = append(errs, fmt.Errorf("full_policy: %q, want drop_oldest or reject", o.FullPolicy))
	}
	check(o.RetentionInterval > 0, "retention_interval: %v, want > 0", o.RetentionInterval)
	check(o.CheckpointInterval > 0, "checkpoint_interval: %v, want > 0", o.CheckpointInterval)
	check(o.Now != nil, "now: clock is nil")
	if len(errs) > 0 {
		return fmt.Errorf("wal: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// TotalPartitions is the number of normal plus hot partitions. Hot partitions
// are numbered after the normal ones.
func (o *Options) TotalPartitions() int { return o.Partitions + o.HotPartitions }

// sizeText writes a byte count as the config does: in the largest binary
// unit that divides it ("12B", "64KiB", "1MiB").
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
