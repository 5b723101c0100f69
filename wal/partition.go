package wal

import (
	"edgeq/internal/fsutil"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	twal "github.com/tidwall/wal"

	"edgeq/internal/hist"
)

// partition is one tidwall/wal log in its own directory with one writer
// goroutine that owns its tail; it fsyncs when the log's committer orders it
// to (commit.go). Locking:
//   - mu guards the tidwall handle pointer and serializes every tidwall call except
//     the writer's WriteBatch/Sync (tidwall's concurrent Reads panic, GOTCHAS 1.6;
//     tidwall's own lock orders a Read against a write).
//   - the writer goroutine alone writes, fsyncs and replaces the handle (under mu).
type partition struct {
	id     int
	dir    string
	opts   *Options
	logger *slog.Logger

	mu     sync.Mutex
	log    *twal.Log
	closed bool // guarded by mu: the log is closed, retention must not touch the files

	// stale: retention deleted segment files that tidwall's handle still
	// lists; the writer reopens the handle at the next segment roll.
	stale atomic.Bool

	reqs chan *appendReq

	// Written by the writer only; read by anyone.
	last    atomic.Uint64 // last index written to the OS
	durable atomic.Uint64 // high-water mark: last index durable under the mode
	synced  atomic.Uint64 // last index covered by a successful fsync
	first   atomic.Uint64 // first index still in the log
	size    atomic.Int64  // bytes of all segment files

	segTimes map[uint64]int64 // newest ingest time per finished segment; guarded by mu

	// firstBad: at open, the first record of the tail segment whose CRC fails
	// with valid ones after it (a hole a power cut left in what was not
	// fsynced); the commit journal's replay restores from there.
	firstBad uint64

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced when durable or first moves

	stats partitionStats

	dirty      atomic.Bool   // has unsynced data the committer has not ordered synced yet
	dirtySince atomic.Int64  // when the oldest unsynced data was written (committer time)
	unckpt     atomic.Bool   // written since the last checkpoint: its file needs an fsync
	syncOrder  chan struct{} // cap 1: the committer's order to fsync now
	// readers waiting in WaitReadable for records past the durable mark:
	// while the partition has unsynced records, they are waiters too.
	readers atomic.Int32

	// writer-owned
	batch     twal.Batch
	tailBytes int          // bytes in the tail segment, to notice when tidwall cycles
	pending   []*appendReq // waiters: written to the OS, waiting for the next fsync round
	lazy      []*appendReq // written, nobody waits: completed right after the committer is told
	counted   int          // waiters counted in the committer's waiting total
	// Every record written since the last fsync, encoded (unsyncedBuf up to
	// unsyncedEnds[i] is record i): a failed fsync leaves them in an unknown
	// state, and they are written again from here, including records nobody
	// waits for (their callers got them back at once).
	unsyncedBuf   []byte
	unsyncedEnds  []int
	unsyncedN     int // records written since the last fsync
	unsyncedBytes int // their bytes as framed on disk
	collectBuf    []*appendReq
	barriers      []*appendReq // Sync's markers of the batch being written
}

// FsyncBounds are the upper bounds of the fsync latency histogram.
var FsyncBounds = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// partitionStats are counters read by Stats; all atomic.
type partitionStats struct {
	appends      atomic.Uint64
	appendBytes  atomic.Uint64
	written      atomic.Uint64 // bytes handed to the OS, rewrites after an error included
	batches      atomic.Uint64
	fsyncs       atomic.Uint64
	writeErrors  atomic.Uint64
	repairs      atomic.Uint64
	reopens      atomic.Uint64 // tidwall handle reopened after retention deleted segments
	corrupt      atomic.Uint64 // records skipped by readers because their CRC failed
	droppedBytes atomic.Uint64
	dropped      atomic.Uint64 // records removed by retention before every consumer committed them
	fsyncLatency *hist.Histogram
}

func twalOptions(o *Options) *twal.Options {
	// Always a fresh struct: twal.DefaultOptions is a mutable global (GOTCHAS 1.2).
	return &twal.Options{
		NoSync:           true, // we fsync ourselves: group commit
		SegmentSize:      o.SegmentSize,
		LogFormat:        twal.Binary,
		SegmentCacheSize: o.SegmentCache,
		NoCopy:           true, // readers copy under p.mu straight away
		AllowEmpty:       true, // retention may empty a partition; offsets stay monotonic
		DirPerms:         0o750,
		FilePerms:        0o640,
	}
}

// openPartition opens (and if needed repairs) the log in dir. It reports what
// it repaired in the returned openReport.
func openPartition(id int, dir string, opts *Options, logger *slog.Logger) (*partition, openReport, error) {
	p := &partition{
		id:        id,
		dir:       dir,
		opts:      opts,
		logger:    logger.With("partition", id),
		reqs:      make(chan *appendReq, opts.QueueDepth),
		syncOrder: make(chan struct{}, 1),
		notify:    make(chan struct{}),
		segTimes:  make(map[uint64]int64),
	}
	p.stats.fsyncLatency = hist.New(FsyncBounds)
	rep, err := p.open()
	if err != nil {
		return nil, rep, err
	}
	return p, rep, nil
}

// openReport tells what opening a partition found and repaired.
type openReport struct {
	TempFiles    int    // leftover *.TEMP files removed
	TornBytes    int64  // bytes cut from a torn or garbage tail
	BadTail      uint64 // records with a failing CRC cut from the tail
	BadInside    uint64 // records with a failing CRC inside the last segment (kept, skipped by readers)
	First, Last  uint64
	TailSegments int
}

func (p *partition) open() (openReport, error) {
	var rep openReport
	if _, err := os.Stat(p.dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(p.dir, 0o750); err != nil {
			return rep, fmt.Errorf("wal: create partition %d: %w", p.id, err)
		}
		if err := fsutil.SyncDir(filepath.Dir(p.dir)); err != nil {
			return rep, err
		}
	}
	n, err := cleanTemp(p.dir)
	rep.TempFiles = n
	if err != nil {
		return rep, fmt.Errorf("wal: open partition %d: %w", p.id, err)
	}
	l, err := twal.Open(p.dir, twalOptions(p.opts))
	if errors.Is(err, twal.ErrCorrupt) {
		// A torn frame in the last segment: cut back to the last complete frame.
		res, rerr := repairDir(p.dir, math.MaxUint64)
		if rerr != nil {
			return rep, fmt.Errorf("wal: repair partition %d: %w", p.id, rerr)
		}
		rep.TornBytes += res.CutBytes
		l, err = twal.Open(p.dir, twalOptions(p.opts))
	}
	if err != nil {
		return rep, fmt.Errorf("wal: open partition %d: %w", p.id, err)
	}
	// Frames that parse can still be garbage (zero fill, a sector of another
	// file): validate the last segment's records by CRC and cut an invalid tail.
	validLast, badInside, firstBad, err := validateTail(p.dir)
	if err != nil {
		_ = l.Close()
		return rep, fmt.Errorf("wal: validate partition %d: %w", p.id, err)
	}
	last, _ := l.LastIndex()
	if validLast < last {
		if err := l.Close(); err != nil && !errors.Is(err, twal.ErrCorrupt) {
			return rep, fmt.Errorf("wal: close partition %d for repair: %w", p.id, err)
		}
		res, rerr := repairDir(p.dir, validLast)
		if rerr != nil {
			return rep, fmt.Errorf("wal: repair partition %d: %w", p.id, rerr)
		}
		rep.TornBytes += res.CutBytes
		rep.BadTail = last - validLast
		if l, err = twal.Open(p.dir, twalOptions(p.opts)); err != nil {
			return rep, fmt.Errorf("wal: reopen partition %d after repair: %w", p.id, err)
		}
	}
	rep.BadInside = badInside
	if badInside > 0 {
		p.firstBad = firstBad // the commit journal may hold those records
	}
	if err := fsutil.SyncDir(p.dir); err != nil {
		_ = l.Close()
		return rep, err
	}
	first, _ := l.FirstIndex()
	last, _ = l.LastIndex()
	rep.First, rep.Last = first, last
	if rep.TornBytes > 0 || rep.BadTail > 0 {
		p.stats.repairs.Add(1)
	}
	p.log = l
	p.first.Store(first)
	p.last.Store(last)
	p.durable.Store(last)
	p.synced.Store(last)
	if p.tailBytes, err = p.refreshSize(); err != nil {
		_ = l.Close()
		return rep, err
	}
	return rep, nil
}

// validateTail checks the CRC of every record in the last segment. It returns
// the index of the last valid record (everything after it is a bad tail) and the
// number of bad records before it.
func validateTail(dir string) (validLast, badInside, firstBad uint64, err error) {
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		return 0, 0, 0, err
	}
	tail := segs[len(segs)-1]
	data, err := readFile(tail.path)
	if err != nil {
		return 0, 0, 0, err
	}
	validLast = tail.first - 1
	var bad uint64
	var rec Record
	scanFrames(data, math.MaxUint64, func(i uint64, frame []byte) {
		if DecodeRecord(frame, &rec) != nil {
			if firstBad == 0 {
				firstBad = tail.first + i
			}
			bad++
			return
		}
		badInside += bad
		bad = 0
		validLast = tail.first + i
	})
	return validLast, badInside, firstBad, nil
}

// refreshSize recounts the bytes of all segment files and returns the size of
// the tail segment.
func (p *partition) refreshSize() (tail int, err error) {
	segs, err := listSegments(p.dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, s := range segs {
		total += s.size
	}
	p.size.Store(total)
	if len(segs) > 0 {
		tail = int(segs[len(segs)-1].size)
	}
	return tail, nil
}

// advance publishes new durable and first indexes and wakes waiting readers.
func (p *partition) advance() {
	p.notifyMu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.notifyMu.Unlock()
}

func (p *partition) waitChan() <-chan struct{} {
	p.notifyMu.Lock()
	ch := p.notify
	p.notifyMu.Unlock()
	return ch
}

// writeReqs encodes reqs, assigns their positions and writes them as one
// tidwall batch (one write to the OS, no fsync). On error the partition is
// cut back to its last good record and reopened. It returns the bytes
// written.
func (p *partition) writeReqs(reqs []*appendReq) (int, error) {
	from := len(p.unsyncedEnds)
	next := p.last.Load() + 1
	for i, r := range reqs {
		p.unsyncedBuf = r.encode(p.unsyncedBuf)
		p.unsyncedEnds = append(p.unsyncedEnds, len(p.unsyncedBuf))
		r.pos = Position{Partition: p.id, Offset: next + uint64(i), Seq: r.seq}
	}
	n, err := p.writeFrames(from)
	if err != nil {
		p.dropFrames(from)
	}
	return n, err
}

// dropFrames forgets the encoded records from index from on.
func (p *partition) dropFrames(from int) {
	if from == 0 {
		p.unsyncedBuf = p.unsyncedBuf[:0]
	} else {
		p.unsyncedBuf = p.unsyncedBuf[:p.unsyncedEnds[from-1]]
	}
	p.unsyncedEnds = p.unsyncedEnds[:from]
}

// frame returns encoded record i of the unsynced ones.
func (p *partition) frame(i int) []byte {
	start := 0
	if i > 0 {
		start = p.unsyncedEnds[i-1]
	}
	return p.unsyncedBuf[start:p.unsyncedEnds[i]]
}

// writeFrames writes the unsynced records from index from on as one tidwall
// batch after p.last.
func (p *partition) writeFrames(from int) (int, error) {
	next := p.last.Load() + 1
	count := len(p.unsyncedEnds) - from
	p.batch.Clear()
	var bytes int
	tail := p.tailBytes
	cycled := false
	for i := 0; i < count; i++ {
		data := p.frame(from + i)
		p.batch.Write(next+uint64(i), data)
		frame := len(data) + uvarintLen(uint64(len(data)))
		bytes += frame
		// Mirror tidwall's cycling (wal.go writeBatch): a new tail segment is
		// started once the tail reaches SegmentSize.
		if tail > p.opts.SegmentSize {
			tail, cycled = 0, true
		}
		if tail += frame; tail >= p.opts.SegmentSize {
			tail, cycled = 0, true
		}
	}
	if err := p.log.WriteBatch(&p.batch); err != nil {
		p.stats.writeErrors.Add(1)
		return 0, p.recover(p.last.Load(), fmt.Errorf("wal: write partition %d: %w", p.id, err))
	}
	p.stats.written.Add(uint64(bytes))
	p.tailBytes = tail
	p.size.Add(int64(bytes))
	if cycled {
		// A new tail segment: make its directory entry durable and drop the
		// finished segment from RAM (readers reload it when they lag).
		if err := fsutil.SyncDir(p.dir); err != nil {
			p.logger.Warn("fsync partition directory", "err", err)
		}
		p.mu.Lock()
		var err error
		if p.stale.Swap(false) {
			err = p.reopenLocked(next + uint64(count) - 1)
		} else {
			_ = p.log.ClearCache()
		}
		p.mu.Unlock()
		if err != nil {
			p.stats.writeErrors.Add(1)
			return 0, p.recover(p.last.Load(), err)
		}
	}
	p.last.Store(next + uint64(count) - 1)
	p.stats.appends.Add(uint64(count))
	p.stats.appendBytes.Add(uint64(bytes))
	p.stats.batches.Add(1)
	return bytes, nil
}

// reopenLocked closes and reopens the tidwall handle (p.mu held, writer
// only), so that tidwall forgets the segments retention deleted. Right after
// a roll the tail it parses again is small. Close fsyncs the tail: nothing is
// acknowledged by that, the committer's round still does.
func (p *partition) reopenLocked(last uint64) error {
	if err := p.log.Close(); err != nil {
		return fmt.Errorf("wal: close partition %d to reopen after retention: %w", p.id, err)
	}
	l, err := twal.Open(p.dir, twalOptions(p.opts))
	if err != nil {
		return fmt.Errorf("wal: reopen partition %d after retention: %w", p.id, err)
	}
	p.log = l
	if got, _ := l.LastIndex(); got != last {
		return fmt.Errorf("wal: reopen partition %d after retention: last index %d, want %d", p.id, got, last)
	}
	p.stats.reopens.Add(1)
	return nil
}

// write writes a batch of new appends: those nobody waits for go to lazy,
// to be completed once the committer knows of them (the log no longer reads
// their records), the others wait in pending for the next fsync round. One retry covers a transient error (the
// handle was repaired back to the last good record); a persistent one
// (ENOSPC) fails the batch at once.
func (p *partition) write(batch []*appendReq) {
	n, err := p.writeReqs(batch)
	if err != nil {
		n, err = p.writeReqs(batch)
	}
	if err != nil {
		completeAll(batch, err)
		return
	}
	p.unsyncedN += len(batch)
	p.unsyncedBytes += n
	for _, r := range batch {
		if r.lazy && p.opts.Durability != DurabilityNone {
			p.lazy = append(p.lazy, r) // completed once the committer knows of them
		} else {
			p.pending = append(p.pending, r)
		}
	}
}

// completeLazy hands back the written records nobody waits for.
func (p *partition) completeLazy() {
	completeAll(p.lazy, nil)
	clear(p.lazy)
	p.lazy = p.lazy[:0]
}

// commit completes pending: after an fsync (sync true) or, under
// durability none, as written to the OS.
func (p *partition) commit(c *committer, sync bool) {
	if sync {
		p.flush(p.pending)
	} else {
		p.publishDurable(p.last.Load())
		completeAll(p.pending, nil)
	}
	p.finish(c)
}

// finish forgets pending and the unsynced records once they are completed.
func (p *partition) finish(c *committer) {
	if p.counted > 0 {
		c.waiting.Add(-int64(p.counted))
		p.counted = 0
	}
	clear(p.pending) // drop the references: requests go back to their pool
	p.pending = p.pending[:0]
	p.unsyncedN, p.unsyncedBytes = 0, 0
	p.dropFrames(0)
	if cap(p.unsyncedBuf) > maxRetainedFrames {
		p.unsyncedBuf, p.unsyncedEnds = nil, nil
	}
}

// maxRetainedFrames is the largest unsynced-record buffer kept for reuse.
const maxRetainedFrames = 1 << 20

// flush fsyncs and completes pending appends. On a failed fsync the data
// written since the last good fsync is in an unknown state: cut back to the
// durable mark, write the unsynced records again and fsync once more.
func (p *partition) flush(pending []*appendReq) {
	err := p.sync()
	if err != nil {
		if _, err = p.writeFrames(0); err == nil {
			err = p.sync()
		}
	}
	if err == nil {
		p.synced.Store(p.last.Load())
		p.publishDurable(p.last.Load())
	}
	completeAll(pending, err)
}

// syncFile fsyncs the partition file at a checkpoint (its records are
// durable in the journal already).
func (p *partition) syncFile() error {
	start := time.Now()
	err := p.log.Sync()
	p.stats.fsyncLatency.Observe(time.Since(start))
	p.stats.fsyncs.Add(1)
	if err != nil {
		p.stats.writeErrors.Add(1)
		p.logger.Error("checkpoint fsync", "err", err)
	}
	return err
}

func (p *partition) sync() error {
	start := time.Now()
	err := p.log.Sync()
	p.stats.fsyncLatency.Observe(time.Since(start))
	p.stats.fsyncs.Add(1)
	if err != nil {
		p.stats.writeErrors.Add(1)
		return p.recover(p.durable.Load(), fmt.Errorf("wal: fsync partition %d: %w", p.id, err))
	}
	return nil
}

func (p *partition) publishDurable(idx uint64) {
	if idx != p.durable.Load() {
		p.durable.Store(idx)
		p.advance()
	}
}

// recover closes the (possibly corrupt) tidwall handle, cuts the files back to
// keep and reopens. tidwall updates its tail buffer before the write, so after
// any write error the handle must not be used again (GOTCHAS 1.4). It returns
// cause, or a joined error when recovery itself failed.
func (p *partition) recover(keep uint64, cause error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.repairs.Add(1)
	_ = p.log.Close() // may fail with the same error; the files are repaired below
	if _, err := repairDir(p.dir, keep); err != nil {
		p.logger.Error("repair after write error failed", "err", err, "cause", cause)
		return errors.Join(cause, err)
	}
	l, err := twal.Open(p.dir, twalOptions(p.opts))
	if err != nil {
		p.logger.Error("reopen after write error failed", "err", err, "cause", cause)
		return errors.Join(cause, err)
	}
	p.log = l
	last, _ := l.LastIndex()
	p.last.Store(last)
	if last < p.durable.Load() {
		p.durable.Store(last)
	}
	if last < p.synced.Load() {
		p.synced.Store(last)
	}
	if p.tailBytes, err = p.refreshSize(); err != nil {
		p.logger.Warn("recount partition size after repair", "err", err)
	}
	p.logger.Warn("partition repaired after write error", "cause", cause, "last", last)
	return cause
}

func completeAll(reqs []*appendReq, err error) {
	for _, r := range reqs {
		r.complete(err)
	}
}
