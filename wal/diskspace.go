package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrDiskLow is returned by appends while the data file system's free space
// is below the watermark (min_free_bytes / min_free_percent) and retention
// could not free enough.
var ErrDiskLow = errors.New("wal: free space on the data disk is below the watermark")

// diskWatch is the data file system's state: free space against the
// watermark, and whether writes are failing (EIO, EROFS).
type diskWatch struct {
	free, total, want atomic.Int64
	low               atomic.Bool
	lowErr            atomic.Pointer[error]  // what publishers get while low
	fault             atomic.Pointer[string] // why the disk refuses writes; nil when healthy
	writeErrors       uint64                 // seen by the last health check (background only)
	// A burst must not outrun the once-a-second check: every checkEvery
	// bytes appended wake the check at once.
	sinceCheck atomic.Int64
	kick       chan struct{}
}

const checkEvery = 256 << 10

// appended counts n bytes and wakes the free-space check every checkEvery.
func (d *diskWatch) appended(n int) {
	if d.sinceCheck.Add(int64(n)) < checkEvery {
		return
	}
	d.sinceCheck.Store(0)
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// minFree is the watermark for a file system of total bytes.
func (l *Log) minFree(total int64) int64 {
	want := l.opts.MinFreeBytes
	if p := l.opts.MinFreePercent; p > 0 {
		want = max(want, int64(float64(total)*p/100))
	}
	return want
}

// resumeMargin is the hysteresis of the watermark: once appends are
// refused, they resume only when the free space is back above the watermark
// by this much (an eighth of it, 256 KiB to 8 MiB), so that a little space
// freed (a compaction of the offsets journal, a removed probe file) does not
// flip the node between refusing and taking appends.
func resumeMargin(want int64) int64 { return min(max(want/8, 256<<10), 8<<20) }

// journalHeadroom is what the commit journal will take again before its
// next checkpoint empties it: a checkpoint frees up to journalCheckpoint
// bytes, which the journal then fills again, so that space counts as used.
// Without this, the space a checkpoint freed lifted the node back above the
// watermark right after it refused appends.
func (l *Log) journalHeadroom() int64 {
	if l.journal == nil || l.commit == nil || !l.commit.journaled() {
		return 0
	}
	return max(journalCheckpoint-l.journal.onDisk.Load(), 0)
}

// statDisk refreshes free and total space and returns how many bytes are
// missing to the watermark (0: enough). The space the commit journal will
// fill again before its checkpoint counts as used (journalHeadroom), and
// while appends are refused the watermark is raised by resumeMargin.
func (l *Log) statDisk() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(l.dir, &st); err != nil {
		return 0, fmt.Errorf("wal: statfs %s: %w", l.dir, err)
	}
	bs := int64(st.Bsize)
	free, total := int64(st.Bavail)*bs, int64(st.Blocks)*bs
	want := l.minFree(total)
	l.disk.free.Store(free)
	l.disk.total.Store(total)
	l.disk.want.Store(want)
	if want == 0 {
		return 0, nil
	}
	avail := free - l.journalHeadroom()
	need := want
	if l.disk.low.Load() {
		need += resumeMargin(want)
	}
	if need > avail {
		return need - avail, nil
	}
	return 0, nil
}

// setDiskLow records the watermark state once retention did what it could.
func (l *Log) setDiskLow(low bool) {
	if low {
		err := fmt.Errorf("%w: %d bytes free (%d of them kept for the commit journal), at least %d wanted (wal.min_free_bytes, wal.min_free_percent)",
			ErrDiskLow, l.disk.free.Load(), l.journalHeadroom(), l.disk.want.Load())
		l.disk.lowErr.Store(&err)
	}
	if l.disk.low.Swap(low) != low {
		l.logger.Warn("free space watermark", "low", low, "free_bytes", l.disk.free.Load(), "want_bytes", l.disk.want.Load())
	}
}

// diskLowErr is the error an append gets while the disk is low.
func (l *Log) diskLowErr() error {
	if e := l.disk.lowErr.Load(); e != nil {
		return *e
	}
	return ErrDiskLow
}

// checkHealth runs every second: it enforces the watermark as soon as the
// disk runs low, and after write errors probes the disk (a small file
// written and fsynced) until it takes writes again.
func (l *Log) checkHealth() {
	deficit, err := l.statDisk()
	if err != nil {
		l.logger.Debug("free space", "err", err)
	}
	if deficit > 0 || l.disk.low.Load() {
		if _, err := l.EnforceRetention(); err != nil {
			l.logger.Error("retention for the free space watermark", "err", err)
		}
	}
	var errs uint64
	for _, p := range l.parts {
		errs += p.stats.writeErrors.Load()
	}
	if errs == l.disk.writeErrors && l.disk.fault.Load() == nil {
		return
	}
	l.disk.writeErrors = errs
	if err := probeDisk(l.dir); err != nil {
		msg := err.Error()
		if l.disk.fault.Swap(&msg) == nil {
			l.logger.Error("data disk refuses writes", "err", err)
		}
		return
	}
	if l.disk.fault.Swap(nil) != nil {
		l.logger.Warn("data disk takes writes again")
	}
}

// probeDisk writes, fsyncs and removes a small file in dir.
func probeDisk(dir string) error {
	p := filepath.Join(dir, ".probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte{'x'})
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(p)
	return errors.Join(werr, serr, cerr, rerr)
}

// Health is nil while the log can store appends; otherwise why not: the
// data disk refuses writes (EIO, EROFS) or its free space is below the
// watermark. /readyz reports it.
func (l *Log) Health() error {
	if s := l.disk.fault.Load(); s != nil {
		return fmt.Errorf("wal: data disk refuses writes: %s", *s)
	}
	if l.disk.low.Load() {
		return l.diskLowErr()
	}
	return nil
}
