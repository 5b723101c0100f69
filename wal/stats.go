package wal

import "edgeq/internal/hist"

// PartitionStats is a snapshot of one partition.
type PartitionStats struct {
	Partition     int
	Hot           bool
	First         uint64 // first stored offset
	Last          uint64 // last written offset
	Durable       uint64 // high-water mark readers may see
	Bytes         int64
	Appends       uint64
	AppendBytes   uint64
	WrittenBytes  uint64 // bytes written to the OS (rewrites after an error included)
	Batches       uint64
	Fsyncs        uint64
	WriteErrors   uint64
	Repairs       uint64
	Corrupt       uint64
	Dropped       uint64
	DroppedBytes  uint64
	FsyncLatency  hist.Snapshot
	QueuedAppends int
}

// Stats is a snapshot of the log.
type Stats struct {
	Partitions []PartitionStats
	Devices    int
	MaxDevices int
	Bytes      int64
	MaxBytes   int64
	Full       bool
	// FullPolicy is what happens when the budget or the watermark is hit.
	FullPolicy FullPolicy
	// Free space of the data file system, its watermark, whether it is below
	// it, and why the disk refuses writes (empty when it takes them).
	DiskFree, DiskTotal, MinFree int64
	DiskLow                      bool
	DiskFault                    string
	// Rejected appends by reason: bad_device_id, too_large, too_many_devices,
	// full, disk_low, closed.
	Rejected map[string]uint64
	// Commit is the node-wide commit schedule: fsync rounds, fsyncs, bytes
	// (the offsets journal's included).
	Commit CommitStats
	// Offsets is the offsets journal's I/O.
	Offsets OffsetStats
}

// Stats returns counters and positions of every partition.
func (l *Log) Stats() Stats {
	s := Stats{MaxDevices: l.opts.MaxDevices, MaxBytes: l.opts.MaxBytes, Full: l.full.Load(), FullPolicy: l.opts.FullPolicy,
		DiskFree: l.disk.free.Load(), DiskTotal: l.disk.total.Load(), MinFree: l.disk.want.Load(), DiskLow: l.disk.low.Load()}
	if f := l.disk.fault.Load(); f != nil {
		s.DiskFault = *f
	}
	for _, p := range l.parts {
		ps := PartitionStats{
			Partition:     p.id,
			Hot:           p.id >= l.opts.Partitions,
			First:         p.first.Load(),
			Last:          p.last.Load(),
			Durable:       p.durable.Load(),
			Bytes:         p.size.Load(),
			Appends:       p.stats.appends.Load(),
			AppendBytes:   p.stats.appendBytes.Load(),
			WrittenBytes:  p.stats.written.Load(),
			Batches:       p.stats.batches.Load(),
			Fsyncs:        p.stats.fsyncs.Load(),
			WriteErrors:   p.stats.writeErrors.Load(),
			Repairs:       p.stats.repairs.Load(),
			Corrupt:       p.stats.corrupt.Load(),
			Dropped:       p.stats.dropped.Load(),
			DroppedBytes:  p.stats.droppedBytes.Load(),
			FsyncLatency:  p.stats.fsyncLatency.Snapshot(),
			QueuedAppends: len(p.reqs),
		}
		s.Bytes += ps.Bytes
		s.Partitions = append(s.Partitions, ps)
	}
	s.Commit = l.commit.stats(s.Partitions)
	os := l.offsets.Stats()
	s.Commit.Fsyncs += os.Fsyncs
	s.Commit.WrittenBytes += os.WrittenBytes
	s.Offsets = os
	l.mu.Lock()
	s.Devices = l.devices.Len()
	l.mu.Unlock()
	s.Rejected = map[string]uint64{
		"bad_device_id":    l.rejected.badDevice.Load(),
		"too_large":        l.rejected.tooLarge.Load(),
		"too_many_devices": l.rejected.tooManyDevices.Load(),
		"full":             l.rejected.full.Load(),
		"disk_low":         l.rejected.diskLow.Load(),
		"closed":           l.rejected.closed.Load(),
	}
	return s
}
