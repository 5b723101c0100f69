package wal

import (
	"edgeq/internal/fsutil"
	"fmt"
	"math"
	"os"
)

// RetentionResult tells what one retention run removed.
type RetentionResult struct {
	RemovedSegments int
	RemovedRecords  uint64
	RemovedBytes    int64
	// Dropped counts records removed before every consumer had committed them
	// (drop_oldest with the budget exceeded).
	Dropped uint64
	// Full is true when the budget is exceeded and full_policy is reject.
	Full bool
	// DiskLow is true when the free space stays below the watermark.
	DiskLow bool
}

// removable is a candidate segment: partition p's oldest segment, [first, next).
type removable struct {
	p           *partition
	seg         segmentFile
	first, next uint64
	size        int64
	newest      int64 // ingest time of its last record, unix ns
}

// EnforceRetention removes whole segments from the front of partitions: those
// older than max_age, then the oldest while the total exceeds max_bytes. A
// segment is removed only when every consumer has committed past it, unless the
// budget is still exceeded and full_policy is drop_oldest. The tail segment of a
// partition is never removed. It runs periodically in the background; tests and
// tools may call it directly; after Close it returns ErrClosed.
func (l *Log) EnforceRetention() (RetentionResult, error) {
	var res RetentionResult
	l.retMu.Lock()
	defer l.retMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return res, ErrClosed
	}
	now := l.opts.Now().UnixNano()
	checkpointed := false
	remove := func(c removable) error {
		if !checkpointed {
			// The device table must cover what is about to disappear (devices
			// whose only records are removed keep their sequence numbers).
			if err := l.checkpoint(); err != nil {
				return err
			}
			checkpointed = true
			if retentionHook != nil {
				retentionHook("checkpoint", c.p.id)
			}
		}
		floor, hasConsumers := l.offsets.Floor(c.p.id)
		if hasConsumers && floor < c.next-1 {
			dropped := c.next - 1 - max(floor, c.first-1)
			res.Dropped += dropped
			c.p.stats.dropped.Add(dropped)
			c.p.stats.droppedBytes.Add(uint64(c.size))
			l.logger.Warn("retention dropped records no consumer has finished", "partition", c.p.id,
				"from", max(floor+1, c.first), "to", c.next-1)
		}
		if err := c.p.removeFront(c); err != nil {
			return err
		}
		res.RemovedSegments++
		res.RemovedRecords += c.next - c.first
		res.RemovedBytes += c.size
		return nil
	}
	// 1. Age.
	if l.opts.MaxAge > 0 {
		cutoff := now - int64(l.opts.MaxAge)
		for _, p := range l.parts {
			for {
				c, ok, err := p.oldestSegment()
				if err != nil {
					return res, err
				}
				if !ok || c.newest >= cutoff || !l.committedPast(c) {
					break
				}
				if err := remove(c); err != nil {
					return res, err
				}
			}
		}
	}
	// 2. Budget (max_bytes, lowered while the free space is below the
	// watermark): oldest committed segments first, then (drop_oldest) any.
	deficit, err := l.statDisk()
	if err != nil {
		l.logger.Debug("free space", "err", err)
	}
	budget, limited := l.opts.MaxBytes, l.opts.MaxBytes > 0
	if deficit > 0 {
		// Refuse while freeing: a burst must not fill the disk meanwhile.
		l.setDiskLow(true)
		if b := max(l.TotalBytes()-deficit, 0); !limited || b < budget {
			budget, limited = b, true
		}
	}
	if limited {
		for _, force := range []bool{false, true} {
			if force && l.opts.FullPolicy != DropOldest {
				break
			}
			for l.TotalBytes() > budget {
				c, ok, err := l.oldestRemovable(force)
				if err != nil {
					return res, err
				}
				if !ok {
					break
				}
				if err := remove(c); err != nil {
					return res, err
				}
			}
		}
		res.Full = l.opts.FullPolicy == Reject && l.opts.MaxBytes > 0 && l.TotalBytes() > l.opts.MaxBytes
	}
	if deficit > 0 {
		deficit, _ = l.statDisk()
	}
	res.DiskLow = deficit > 0
	l.setDiskLow(res.DiskLow)
	if l.full.Swap(res.Full) != res.Full {
		l.logger.Warn("disk budget state changed", "full", res.Full, "bytes", l.TotalBytes(), "max_bytes", l.opts.MaxBytes)
	}
	return res, nil
}

// committedPast reports whether every consumer has finished segment c.
func (l *Log) committedPast(c removable) bool {
	floor, ok := l.offsets.Floor(c.p.id)
	return !ok || floor >= c.next-1
}

// oldestRemovable picks, over all partitions, the front segment with the oldest
// newest record; unless force, only segments every consumer has finished.
func (l *Log) oldestRemovable(force bool) (removable, bool, error) {
	var best removable
	found := false
	for _, p := range l.parts {
		c, ok, err := p.oldestSegment()
		if err != nil {
			return best, false, err
		}
		if !ok || (!force && !l.committedPast(c)) {
			continue
		}
		if !found || c.newest < best.newest {
			best, found = c, true
		}
	}
	return best, found, nil
}

// TotalBytes is the size of all segment files.
func (l *Log) TotalBytes() int64 {
	var n int64
	for _, p := range l.parts {
		n += p.size.Load()
	}
	return n
}

// oldestSegment describes the partition's first segment if it is not the tail.
func (p *partition) oldestSegment() (removable, bool, error) {
	segs, err := listSegments(p.dir)
	if err != nil || len(segs) < 2 {
		return removable{}, false, err
	}
	c := removable{p: p, seg: segs[0], first: segs[0].first, next: segs[1].first, size: segs[0].size, newest: math.MinInt64}
	if first := p.first.Load(); first > c.first {
		c.first = first
	}
	newest, err := p.newestTime(segs[0])
	if err != nil {
		return c, false, err
	}
	c.newest = newest
	return c, true, nil
}

// newestTime is the ingest time of the last valid record of a finished segment,
// remembered per segment (finished segments never change).
func (p *partition) newestTime(s segmentFile) (int64, error) {
	p.mu.Lock()
	if t, ok := p.segTimes[s.first]; ok {
		p.mu.Unlock()
		return t, nil
	}
	p.mu.Unlock()
	data, err := readFile(s.path)
	if err != nil {
		return 0, err
	}
	newest := int64(math.MinInt64)
	var rec Record
	scanFrames(data, math.MaxUint64, func(_ uint64, frame []byte) {
		if DecodeRecord(frame, &rec) == nil && rec.Time > newest {
			newest = rec.Time
		}
	})
	p.mu.Lock()
	if len(p.segTimes) >= maxSegTimes {
		clear(p.segTimes)
	}
	p.segTimes[s.first] = newest
	p.mu.Unlock()
	return newest, nil
}

// maxSegTimes bounds the per-partition cache of segment times.
const maxSegTimes = 4096

// retentionHook, when set (tests), is called after each step of a retention
// run that changes the disk: "checkpoint" (the device table covers what is
// about to go) and "removed" (one segment file deleted, its directory
// fsynced), so that a test can copy every state a crash could leave.
var retentionHook func(step string, partition int)

// removeFront deletes c, the partition's first segment file, and so every
// record before c.next, the first index of the second segment. Nothing is
// copied or renamed: the remaining segments stay as they are, byte for byte
// (tidwall's TruncateFront would rewrite the segment that holds c.next,
// copy, fsync and rename, even at a segment boundary: wal.go truncateFront).
//
// It deletes the file behind tidwall's back, which is safe because:
//   - reads below c.next are refused first (p.first, under p.mu, which every
//     Read holds), so tidwall never loads the deleted file;
//   - segments go oldest first, each deletion fsynced (the directory) before
//     the next: whatever a crash leaves is a contiguous suffix of segments.
//     tidwall's load() does not check that segments are contiguous, and a gap
//     would make it index records of the wrong segment;
//   - tidwall's in-memory segment list still names the deleted file; the
//     writer reopens the handle at the next segment roll (p.stale), so the
//     list stays as long as the files on disk, and a reopen right after a
//     roll parses only the new, nearly empty tail.
func (p *partition) removeFront(c removable) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	prev := p.first.Load()
	p.first.Store(c.next)
	if err := os.Remove(c.seg.path); err != nil && !os.IsNotExist(err) {
		p.first.Store(prev)
		p.mu.Unlock()
		return fmt.Errorf("wal: retention: remove segment %s of partition %d: %w", c.seg.path, p.id, err)
	}
	p.stale.Store(true)
	delete(p.segTimes, c.seg.first)
	p.mu.Unlock()
	p.size.Add(-c.size)
	p.advance()
	if err := fsutil.SyncDir(p.dir); err != nil {
		return fmt.Errorf("wal: retention: partition %d: %w", p.id, err)
	}
	if retentionHook != nil {
		retentionHook("removed", p.id)
	}
	return nil
}
