// Package wal is edgeq's partitioned telemetry log on tidwall/wal.
//
// A Log has Partitions normal and HotPartitions isolation partitions, each one
// tidwall/wal log in its own directory, written by its own goroutine. One
// committer for the whole log group commits: it runs fsync rounds over the
// partitions with unsynced data (commit.go). Every record carries a version and a CRC32C; a torn or garbage tail
// is cut on open, a bad record inside the log is skipped and counted.
//
// Contract:
//   - Append returns a record's Position only once it is durable under the
//     durability mode; readers never see a record past the durable high-water
//     mark, so nothing a consumer processed can vanish in a crash.
//   - A device's sequence numbers start at 1 and grow by one per accepted
//     record, across restarts and kill -9; they never repeat or go backwards. A
//     record that fails to be stored after its number was assigned (a write
//     error) leaves a gap.
//   - Retention truncates only at segment boundaries and never past the lowest
//     committed offset of any consumer (OffsetStore), except under
//     full_policy drop_oldest, which counts what it drops.
package wal

import (
	"context"
	"edgeq/internal/fsutil"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// offsetsLazyFactor: offset commits nobody waits for (the runners' periodic
// flush) are fsynced within this many lazy_sync (5 s by default).
const offsetsLazyFactor = 5

// Errors of the log.
var (
	ErrClosed         = errors.New("wal: log closed")
	ErrFull           = errors.New("wal: disk budget exhausted (full_policy reject)")
	ErrTooManyDevices = errors.New("wal: device table full (max_devices)")
	ErrLocked         = errors.New("wal: data directory is in use by another process")
	ErrBadPartition   = errors.New("wal: no such partition")
)

// Log is the partitioned telemetry log. It is safe for concurrent use.
type Log struct {
	opts   Options
	dir    string
	logger *slog.Logger
	lock   *os.File

	parts   []*partition
	journal *journal // the commit journal (nil under durability none)
	commit  *committer
	drained sync.WaitGroup // writers that have not yet drained their closed queue
	writers sync.WaitGroup // writer goroutines running

	// mu orders appends: sequence numbers, routing and the enqueue into a
	// partition's writer happen under it, so a partition's offsets follow its
	// devices' sequence numbers.
	mu      sync.Mutex
	devices *deviceTable
	closed  bool

	offsets *OffsetStore
	full    atomic.Bool

	ckptMu sync.Mutex // one checkpoint at a time
	// retMu: one retention run at a time, none once Close has passed it.
	retMu sync.Mutex

	stop   chan struct{}
	bgDone chan struct{}

	rejected rejectCounters
	report   OpenReport
	disk     diskWatch
}

type rejectCounters struct {
	badDevice, tooLarge, tooManyDevices, full, closed, diskLow atomic.Uint64
}

// OpenReport tells what Open found and repaired, per partition.
type OpenReport struct {
	Partitions      []PartitionReport
	Journal         JournalReport
	ScannedRecords  uint64 // records read to rebuild the device table
	CheckpointFound bool
	Duration        time.Duration
}

// PartitionReport is one partition's part of OpenReport.
type PartitionReport struct {
	Partition   int
	First, Last uint64
	TempFiles   int
	TornBytes   int64
	BadTail     uint64
	BadInside   uint64
}

// Repaired reports whether anything was cut or removed.
func (r PartitionReport) Repaired() bool {
	return r.TempFiles > 0 || r.TornBytes > 0 || r.BadTail > 0
}

// Open opens or creates the log in dir. It takes an exclusive lock on the
// directory, repairs damaged tails and rebuilds the device table.
func Open(dir string, opts Options, logger *slog.Logger) (*Log, error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	if err := fsutil.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{
		opts:   opts,
		dir:    dir,
		logger: logger.With("component", "wal"),
		lock:   lock,
		stop:   make(chan struct{}),
		bgDone: make(chan struct{}),
		disk:   diskWatch{kick: make(chan struct{}, 1)},
	}
	if err := l.open(); err != nil {
		l.closeParts()
		if l.journal != nil {
			_ = l.journal.close()
		}
		_ = lock.Close()
		return nil, err
	}
	l.report.Duration = time.Since(start)
	l.commit = newCommitter(l.parts, &l.opts, l.journal, l.logger)
	for _, p := range l.parts {
		l.drained.Add(1)
		l.writers.Add(1)
		go func() {
			defer l.writers.Done()
			p.run(l.commit, &l.drained)
		}()
	}
	go l.commit.run()
	go l.background()
	return l, nil
}

func (l *Log) open() error {
	if err := checkMeta(l.dir, &l.opts); err != nil {
		return err
	}
	for i := 0; i < l.opts.TotalPartitions(); i++ {
		p, rep, err := openPartition(i, partitionDir(l.dir, i), &l.opts, l.logger)
		l.report.Partitions = append(l.report.Partitions, PartitionReport{
			Partition: i, First: rep.First, Last: rep.Last, TempFiles: rep.TempFiles,
			TornBytes: rep.TornBytes, BadTail: rep.BadTail, BadInside: rep.BadInside,
		})
		if err != nil {
			return err
		}
		l.parts = append(l.parts, p)
		if pr := l.report.Partitions[i]; pr.Repaired() || pr.BadInside > 0 {
			l.logger.Warn("partition repaired on open", "partition", i, "torn_bytes", pr.TornBytes,
				"bad_tail_records", pr.BadTail, "bad_records_inside", pr.BadInside, "temp_files", pr.TempFiles)
		}
	}
	// Records the partition files lost in a power cut come back from the
	// commit journal before anything reads the partitions.
	jrep, err := replayJournal(l.dir, l.parts, l.logger)
	l.report.Journal = jrep
	if err != nil {
		return err
	}
	if jrep.Replayed > 0 || jrep.Gaps > 0 {
		l.logger.Warn("commit journal replayed", "records", jrep.Replayed, "entries", jrep.Entries, "gaps", jrep.Gaps)
	}
	for i, p := range l.parts {
		l.report.Partitions[i].Last = p.last.Load()
	}
	if l.opts.Durability != DurabilityNone {
		if l.journal, err = openJournal(l.dir, l.logger); err != nil {
			return err
		}
	}
	devices, found, scanned, err := recoverDevices(l.dir, l.parts, l.opts.MaxDevices, l.logger)
	if err != nil {
		return err
	}
	l.devices = devices
	l.report.CheckpointFound = found
	l.report.ScannedRecords = scanned
	if err := l.checkpoint(); err != nil {
		return err
	}
	// Offsets nobody waits for are fsynced within offsetsLazyFactor ×
	// lazy_sync: losing them costs redeliveries, never data.
	lazy := l.opts.LazySync
	if lazy <= 0 {
		lazy = time.Second
	}
	l.offsets, err = openOffsetStore(l.dir, offsetsLazyFactor*lazy)
	return err
}

func partitionDir(dir string, p int) string {
	return filepath.Join(dir, fmt.Sprintf("p%03d", p))
}

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("wal: lock %s: %w", dir, err)
	}
	return f, nil
}

// Report returns what Open found and repaired.
func (l *Log) Report() OpenReport { return l.report }

// Options returns the options the log runs with.
func (l *Log) Options() Options { return l.opts }

// Dir is the data directory.
func (l *Log) Dir() string { return l.dir }

// Offsets is the committed-offset store of the log's consumers.
func (l *Log) Offsets() *OffsetStore { return l.offsets }

// Append stores rec and returns its position once it is durable. The log reads
// rec until Append returns. If ctx ends first, Append returns ctx.Err() and the
// record may or may not be stored.
func (l *Log) Append(ctx context.Context, rec *Record) (Position, error) {
	r := getReq()
	r.rec, r.kind = rec, KindData
	if err := l.enqueue(ctx, r); err != nil {
		putReq(r)
		return Position{}, err
	}
	select {
	case <-r.done:
		pos, err := r.pos, r.err
		putReq(r)
		return pos, err
	case <-ctx.Done():
		// r still belongs to the writer; it is left to the garbage collector.
		return Position{}, ctx.Err()
	}
}

// AppendAsync queues rec and calls cb exactly once with its position when it is
// durable (when rec.NoWait: once it is written to the OS), or with an error. cb runs on a partition's writer goroutine (or on
// the caller's goroutine when the append is refused at once) and must not
// block; it is how bridges and connections acknowledge publishers after group
// commit. The log reads rec until
// cb is called. AppendAsync blocks only while the partition's queue is full.
func (l *Log) AppendAsync(rec *Record, cb func(Position, error)) {
	r := getReq()
	r.rec, r.kind, r.cb, r.lazy = rec, KindData, cb, rec.NoWait
	if err := l.enqueue(context.Background(), r); err != nil {
		putReq(r)
		cb(Position{}, err)
	}
}

// enqueue validates r, assigns its sequence number and partition, and hands it
// to the partition's writer.
func (l *Log) enqueue(ctx context.Context, r *appendReq) error {
	if err := ValidateDeviceID(r.rec.Device); err != nil {
		l.rejected.badDevice.Add(1)
		return err
	}
	if len(r.rec.Source) > MaxSourceLen || len(r.rec.Headers) > MaxHeaders {
		l.rejected.tooLarge.Add(1)
		return fmt.Errorf("%w: source or headers beyond limits", ErrTooLarge)
	}
	if n := r.encodedLen() + 24; n > l.opts.MaxRecordBytes {
		l.rejected.tooLarge.Add(1)
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, l.opts.MaxRecordBytes)
	}
	if l.full.Load() {
		l.rejected.full.Add(1)
		return ErrFull
	}
	if l.disk.low.Load() {
		l.rejected.diskLow.Add(1)
		return l.diskLowErr()
	}
	l.disk.appended(len(r.rec.Payload))
	r.time = r.rec.Time
	if r.time == 0 {
		r.time = l.opts.Now().UnixNano()
	}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			l.rejected.closed.Add(1)
			return ErrClosed
		}
		d, err := l.devices.get(r.rec.Device, l.opts.Partitions)
		if err != nil {
			l.mu.Unlock()
			l.rejected.tooManyDevices.Add(1)
			return err
		}
		r.seq = d.lastSeq + 1
		r.moveRef = d.moveRef
		select {
		case l.parts[d.partition].reqs <- r:
			d.lastSeq = r.seq
			l.mu.Unlock()
			return nil
		default:
		}
		// The writer is behind: wait outside the lock (nothing was assigned).
		l.mu.Unlock()
		if err := queueFullPause(ctx); err != nil {
			return err
		}
	}
}

// Sync returns once every record appended before it was called (records
// nobody waits for, and those still queued for their partition's writer,
// included) is durable under the durability mode: it puts a barrier into
// every partition's queue, which waits for a commit round like an append
// that waits, paced the same way.
func (l *Log) Sync(ctx context.Context) error {
	barriers := make([]*appendReq, len(l.parts))
	for i := range l.parts {
		r := &appendReq{barrier: true, done: make(chan struct{}, 1)}
		if err := l.enqueueBarrier(ctx, i, r); err != nil {
			return err
		}
		barriers[i] = r
	}
	for _, r := range barriers {
		select {
		case <-r.done:
			if r.err != nil {
				return r.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// enqueueBarrier hands Sync's barrier r to partition p's writer, behind
// every append queued before it.
func (l *Log) enqueueBarrier(ctx context.Context, p int, r *appendReq) error {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		select {
		case l.parts[p].reqs <- r:
			l.mu.Unlock()
			return nil
		default:
		}
		l.mu.Unlock()
		if err := queueFullPause(ctx); err != nil {
			return err
		}
	}
}

// queueFullPause waits a moment for a partition writer whose queue is full
// to take from it, or for ctx to end.
func queueFullPause(ctx context.Context) error {
	t := time.NewTimer(200 * time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WaitReadable waits until partition p has something to read from offset
// from on: a durable record at from or after it, or retention having
// removed from (First(p) > from). It returns false if ctx ends first.
//
// Readers see only durable records, so that nothing a consumer processed
// can vanish in a power cut. A reader waiting here for records that are
// written but not yet durable (records nobody waits for: Record.NoWait) is
// therefore a waiter itself: it starts a commit round as a pub-ack does,
// paced the same way (fsync_interval), and one round serves every waiting
// reader and every partition. Records nobody reads wait for lazy_sync.
func (l *Log) WaitReadable(ctx context.Context, p int, from uint64) bool {
	pt, err := l.part(p)
	if err != nil {
		return false
	}
	registered := false
	defer func() {
		if registered {
			pt.readers.Add(-1)
		}
	}()
	for {
		// Take the channel before looking, so that a move in between is not missed.
		ch := pt.waitChan()
		if pt.durable.Load() >= from || pt.first.Load() > from {
			return true
		}
		if !registered {
			// Counted before last is read: a writer that writes after
			// this sees the reader (committer.state), one that wrote
			// before is seen here.
			pt.readers.Add(1)
			registered = true
		}
		if pt.last.Load() >= from {
			l.commit.kick()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Close stops the writers and the committer after they have made everything queued durable,
// checkpoints the device table and releases the directory lock.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	for _, p := range l.parts {
		close(p.reqs)
	}
	l.mu.Unlock()
	l.drained.Wait()
	close(l.commit.stop)
	<-l.commit.done
	l.writers.Wait()
	close(l.stop)
	<-l.bgDone
	l.retMu.Lock() // a retention run started by a caller finishes first
	l.retMu.Unlock()
	errs := []error{l.checkpoint(), l.offsets.close()}
	perr := l.closeParts() // fsyncs every partition file
	errs = append(errs, perr)
	if l.journal != nil {
		errs = append(errs, l.journal.close())
		if perr == nil {
			// Everything the journal held is in the files: start empty.
			errs = append(errs, removeSegments(l.journal.dir))
		}
	}
	errs = append(errs, l.lock.Close())
	return errors.Join(errs...)
}

func (l *Log) closeParts() error {
	var errs []error
	for _, p := range l.parts {
		p.mu.Lock()
		p.closed = true
		if p.log != nil {
			if err := p.log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("wal: close partition %d: %w", p.id, err))
			}
		}
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// background runs retention and device-table checkpoints.
func (l *Log) background() {
	defer close(l.bgDone)
	ret := time.NewTicker(l.opts.RetentionInterval)
	defer ret.Stop()
	ck := time.NewTicker(l.opts.CheckpointInterval)
	defer ck.Stop()
	health := time.NewTicker(time.Second)
	defer health.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-health.C:
			l.checkHealth()
		case <-l.disk.kick:
			l.checkHealth()
		case <-ret.C:
			if _, err := l.EnforceRetention(); err != nil && !errors.Is(err, ErrClosed) {
				l.logger.Error("retention", "err", err)
			}
		case <-ck.C:
			if err := l.checkpoint(); err != nil {
				l.logger.Error("checkpoint device table", "err", err)
			}
		}
	}
}

func (l *Log) part(p int) (*partition, error) {
	if p < 0 || p >= len(l.parts) {
		return nil, fmt.Errorf("%w: %d", ErrBadPartition, p)
	}
	return l.parts[p], nil
}

// NumPartitions is the number of partitions, normal and hot.
func (l *Log) NumPartitions() int { return len(l.parts) }

// Durable is the high-water mark of partition p: the last offset readers may see.
func (l *Log) Durable(p int) uint64 { return l.parts[p].durable.Load() }

// First is the first offset still stored in partition p.
func (l *Log) First(p int) uint64 { return l.parts[p].first.Load() }

// Notify returns a channel that is closed when partition p's durable mark or
// first offset moves. Take the channel, then check Durable, then wait on it:
// consumers never busy-poll.
func (l *Log) Notify(p int) <-chan struct{} { return l.parts[p].waitChan() }
