package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	twal "github.com/tidwall/wal"

	"edgeq/internal/fsutil"
)

// The commit journal: one tidwall/wal log for the whole node (dir
// "journal") that makes a commit round durable with one fsync, whatever the
// number of partitions. In a round every dirty partition hands the records
// it wrote since its last durable point to the journal (one entry per
// partition: its id, the offset of its first record, the records as they
// are in the partition file); the journal writes them as one batch and
// fsyncs once. The partition files themselves are written as before but not
// fsynced in the round: they are fsynced at a checkpoint (when the journal
// holds journalCheckpoint bytes, and at Close), after which the journal is
// emptied.
//
// Open replays the journal into the partitions after their own tail repair:
// a record the partition file lost in a power cut (written, not yet fsynced
// there) is appended again from the journal; records the file still has are
// skipped. Then the partitions are fsynced and the journal emptied.
//
// Costs: every record is written twice (once to its partition, once to the
// journal; the partition's copy reaches the disk at the kernel's writeback or
// the checkpoint, in whole pages), a checkpoint fsyncs every partition
// written since the last one, and up to journalCheckpoint bytes are replayed
// at open. In exchange a round costs one fsync of one file.
//
// Entry: version byte, CRC32C (4 bytes, little-endian) of what follows,
// uvarint partition, uvarint first offset, uvarint count, then count times
// uvarint length + record. Replay stops at the first entry that does not
// parse or whose CRC fails: a torn or zero-filled tail.
const (
	journalDir        = "journal"
	journalVersion    = 1
	journalCheckpoint = 1 << 20
	journalSegment    = 4 << 20
)

type journal struct {
	dir    string
	logger *slog.Logger

	mu           sync.Mutex // guards batch and entries while writers contribute
	log          *twal.Log
	next         uint64 // next tidwall index
	batch        twal.Batch
	entries      int
	scratch      []byte
	bytes        int64 // bytes since the last reset
	pendingBytes int   // bytes of the batch being built, framed

	fsyncs, written, checkpoints atomic.Uint64
	onDisk                       atomic.Int64 // bytes in its segment files (what a checkpoint frees)
}

func journalOptions() *twal.Options {
	return &twal.Options{NoSync: true, SegmentSize: journalSegment, LogFormat: twal.Binary,
		SegmentCacheSize: 1, NoCopy: true, DirPerms: 0o750, FilePerms: 0o640}
}

// openJournal opens an empty journal in dir (replayJournal has emptied it).
func openJournal(dir string, logger *slog.Logger) (*journal, error) {
	j := &journal{dir: filepath.Join(dir, journalDir), logger: logger}
	if err := fsutil.MkdirAll(j.dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: create journal: %w", err)
	}
	l, err := twal.Open(j.dir, journalOptions())
	if err != nil {
		return nil, fmt.Errorf("wal: open journal: %w", err)
	}
	// tidwall creates the segment file but never fsyncs the directory
	// (GOTCHAS 1.8): without this a power cut takes the whole journal.
	if err := fsutil.SyncDir(j.dir); err != nil {
		_ = l.Close()
		return nil, err
	}
	j.log = l
	last, _ := l.LastIndex()
	j.next = last + 1
	return j, nil
}

// add appends one partition's entry to the round's batch (writers call it
// concurrently).
func (j *journal) add(partition int, first uint64, frames func(i int) []byte, count int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := append(j.scratch[:0], journalVersion, 0, 0, 0, 0)
	b = binary.AppendUvarint(b, uint64(partition))
	b = binary.AppendUvarint(b, first)
	b = binary.AppendUvarint(b, uint64(count))
	for i := 0; i < count; i++ {
		f := frames(i)
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	binary.LittleEndian.PutUint32(b[1:5], crc32.Checksum(b[5:], castagnoli))
	j.batch.Write(j.next+uint64(j.entries), b)
	j.entries++
	j.bytes += int64(len(b))
	j.pendingBytes += len(b) + uvarintLen(uint64(len(b)))
	j.scratch = b[:0]
}

// commit writes the round's entries and fsyncs the journal once.
func (j *journal) commit() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.entries == 0 {
		return nil
	}
	n := j.entries
	j.entries = 0
	if err := j.log.WriteBatch(&j.batch); err != nil {
		j.batch.Clear()
		j.pendingBytes = 0
		return fmt.Errorf("wal: write journal: %w", err)
	}
	j.batch.Clear()
	if j.bytes >= journalSegment/2 {
		// A round this large may have started a new segment file.
		if err := fsutil.SyncDir(j.dir); err != nil {
			return err
		}
	}
	j.next += uint64(n)
	j.written.Add(uint64(j.pendingBytes))
	j.onDisk.Add(int64(j.pendingBytes))
	j.pendingBytes = 0
	j.fsyncs.Add(1)
	if err := j.log.Sync(); err != nil {
		return fmt.Errorf("wal: fsync journal: %w", err)
	}
	return nil
}

// full says whether a checkpoint is due.
func (j *journal) full() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.bytes >= journalCheckpoint
}

// reset empties the journal once every partition file holds what it
// recorded (fsynced): close, remove its segments, reopen empty. A crash in
// between leaves some of it, which replay skips (the partitions have it).
func (j *journal) reset() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.log.Close(); err != nil {
		return fmt.Errorf("wal: close journal: %w", err)
	}
	if err := removeSegments(j.dir); err != nil {
		return err
	}
	l, err := twal.Open(j.dir, journalOptions())
	if err != nil {
		return fmt.Errorf("wal: reopen journal: %w", err)
	}
	if err := fsutil.SyncDir(j.dir); err != nil { // its new segment file
		_ = l.Close()
		return err
	}
	j.log, j.next, j.bytes = l, 1, 0
	j.onDisk.Store(0)
	j.checkpoints.Add(1)
	return nil
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log.Close()
}

// removeSegments removes every file of a journal directory, newest first (a
// crash in between leaves an older prefix, never a gap), then fsyncs it.
func removeSegments(dir string) error {
	segs, err := listSegments(dir)
	if err != nil {
		return err
	}
	for i := len(segs) - 1; i >= 0; i-- {
		if err := os.Remove(segs[i].path); err != nil {
			return fmt.Errorf("wal: empty journal: %w", err)
		}
	}
	if _, err := cleanTemp(dir); err != nil {
		return err
	}
	for _, suffix := range []string{".START", ".END"} {
		matches, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	return fsutil.SyncDir(dir)
}

// journalEntry is one decoded entry.
type journalEntry struct {
	partition int
	first     uint64
	frames    [][]byte
}

func decodeJournalEntry(b []byte) (journalEntry, bool) {
	var e journalEntry
	if len(b) < 5 || b[0] != journalVersion || crc32.Checksum(b[5:], castagnoli) != binary.LittleEndian.Uint32(b[1:5]) {
		return e, false
	}
	rest := b[5:]
	read := func() (uint64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return 0, false
		}
		rest = rest[n:]
		return v, true
	}
	p, ok1 := read()
	first, ok2 := read()
	count, ok3 := read()
	if !ok1 || !ok2 || !ok3 || p > math.MaxInt32 || first == 0 || count > uint64(len(rest)) {
		return e, false
	}
	e.partition, e.first = int(p), first
	for i := uint64(0); i < count; i++ {
		n, ok := read()
		if !ok || n > uint64(len(rest)) {
			return e, false
		}
		e.frames = append(e.frames, rest[:n])
		rest = rest[n:]
	}
	return e, len(rest) == 0
}

// JournalReport says what replaying the journal did at open.
type JournalReport struct {
	Entries  int    // valid entries read
	Replayed uint64 // records appended to partitions from it
	Gaps     int    // entries that could not be applied (the partition misses records before them)
}

// replayJournal reads the journal in dir (if any), appends to each partition
// the records it lacks, fsyncs the partitions it changed and empties the
// journal.
func replayJournal(dir string, parts []*partition, logger *slog.Logger) (JournalReport, error) {
	var rep JournalReport
	jdir := filepath.Join(dir, journalDir)
	segs, err := listSegments(jdir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(segs) == 0) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("wal: read journal: %w", err)
	}
	var entries []journalEntry
	expect := segs[0].first
scan:
	for _, s := range segs {
		if s.first != expect {
			break // a segment missing in between: what follows cannot be trusted
		}
		data, err := os.ReadFile(s.path)
		if err != nil {
			return rep, fmt.Errorf("wal: read journal: %w", err)
		}
		var bad bool
		count, _ := scanFrames(data, math.MaxUint64, func(_ uint64, frame []byte) {
			if bad {
				return
			}
			e, ok := decodeJournalEntry(frame)
			if !ok {
				bad = true
				return
			}
			entries = append(entries, e)
		})
		if bad {
			break scan
		}
		expect = s.first + count
	}
	rep.Entries = len(entries)
	touched := map[int]bool{}
	// A hole in a partition's unsynced tail (records failing their CRC with
	// valid ones after them) that the journal covers: cut the file back to
	// the hole and take everything from there from the journal.
	for _, p := range parts {
		if p.firstBad == 0 {
			continue
		}
		for _, e := range entries {
			if e.partition == p.id && e.first <= p.firstBad && p.firstBad < e.first+uint64(len(e.frames)) {
				if err := p.cutTo(p.firstBad - 1); err != nil {
					return rep, err
				}
				touched[p.id] = true
				break
			}
		}
	}
	gapped := map[int]bool{}
	for _, e := range entries {
		{
			if e.partition >= len(parts) || gapped[e.partition] {
				continue
			}
			p := parts[e.partition]
			n, gap, err := p.replay(e.first, e.frames)
			if err != nil {
				logger.Error("journal replay", "partition", e.partition, "err", err)
				gapped[e.partition] = true
				continue
			}
			if gap {
				rep.Gaps++
				gapped[e.partition] = true
				logger.Error("journal entry past the partition's end: records are missing", "partition", e.partition,
					"first", e.first, "last", p.last.Load())
				continue
			}
			if n > 0 {
				rep.Replayed += n
				touched[e.partition] = true
			}
		}
	}
	for id := range touched {
		p := parts[id]
		if err := p.log.Sync(); err != nil {
			return rep, fmt.Errorf("wal: fsync partition %d after journal replay: %w", id, err)
		}
		if err := fsutil.SyncDir(p.dir); err != nil {
			return rep, err
		}
	}
	if err := removeSegments(jdir); err != nil {
		return rep, err
	}
	return rep, nil
}

// cutTo cuts the partition back to last at open (before the writer runs),
// for the journal to restore what follows.
func (p *partition) cutTo(last uint64) error {
	if err := p.log.Close(); err != nil && !errors.Is(err, twal.ErrCorrupt) {
		return fmt.Errorf("wal: close partition %d for journal replay: %w", p.id, err)
	}
	if _, err := repairDir(p.dir, last); err != nil {
		return fmt.Errorf("wal: cut partition %d for journal replay: %w", p.id, err)
	}
	l, err := twal.Open(p.dir, twalOptions(p.opts))
	if err != nil {
		return fmt.Errorf("wal: reopen partition %d for journal replay: %w", p.id, err)
	}
	p.log = l
	got, _ := l.LastIndex()
	p.last.Store(got)
	p.durable.Store(got)
	p.synced.Store(got)
	p.firstBad = 0
	tail, err := p.refreshSize()
	if err != nil {
		return err
	}
	p.tailBytes = tail
	return nil
}

// replay appends the frames of a journal entry that the partition lacks (at
// open, before the writer runs). gap: the entry starts past the partition's
// end.
func (p *partition) replay(first uint64, frames [][]byte) (uint64, bool, error) {
	last := p.last.Load()
	if first > last+1 {
		return 0, true, nil
	}
	skip := last + 1 - first
	if skip >= uint64(len(frames)) {
		return 0, false, nil
	}
	var rec Record
	p.batch.Clear()
	bytes := 0
	for i, f := range frames[skip:] {
		if err := DecodeRecord(f, &rec); err != nil {
			return 0, false, fmt.Errorf("journal record for offset %d: %w", last+1+uint64(i), err)
		}
		p.batch.Write(last+1+uint64(i), f)
		bytes += len(f) + uvarintLen(uint64(len(f)))
	}
	if err := p.log.WriteBatch(&p.batch); err != nil {
		return 0, false, fmt.Errorf("append from journal: %w", err)
	}
	n := uint64(len(frames)) - skip
	p.last.Store(last + n)
	p.durable.Store(last + n)
	p.synced.Store(last + n)
	p.size.Add(int64(bytes))
	tail, err := p.refreshSize()
	if err != nil {
		return 0, false, err
	}
	p.tailBytes = tail
	return n, false, nil
}
