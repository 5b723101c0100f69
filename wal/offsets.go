package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/internal/fsutil"
)

// MaxConsumers bounds the consumers an OffsetStore keeps.
const MaxConsumers = 4096

// offsetsFile is the JSON file older versions kept (atomic replace); it is
// converted to the journal on open.
const offsetsFile = "offsets.json"

// offsetsCompactMin is the journal size below which it is never compacted.
const offsetsCompactMin = 64 << 10

// ErrTooManyConsumers is returned by Commit when MaxConsumers are known.
var ErrTooManyConsumers = errors.New("wal: too many consumers in the offset store")

// OffsetStore keeps each consumer's committed offset per partition: everything
// at or below it is finished for that consumer. Commits are held in memory;
// Flush appends what changed to the offsets journal (offsetlog.go) and
// fsyncs it, FlushLazy appends without waiting and leaves the fsync to
// lazy_sync. Nothing is rewritten in place: a commit costs a few dozen bytes,
// and the journal is compacted (atomic replace) once it is four times its
// live content. Retention never truncates past the lowest committed offset of
// any consumer.
type OffsetStore struct {
	dir  string
	path string
	lazy time.Duration

	flushMu  sync.Mutex // file I/O, one at a time
	f        *os.File   // the journal, opened for append
	size     int64      // bytes in the journal
	snapSize int64      // bytes of the last snapshot (compaction)
	broken   bool       // a write failed: the next flush rewrites the journal whole
	unsynced bool       // written, not fsynced
	timer    *time.Timer
	armed    bool // timer is set and has not fired
	closed   bool

	mu        sync.Mutex
	consumers map[string]map[int]uint64
	drained   map[string]bool // consumers whose last run stopped with nothing unfinished; bound: as consumers
	// What changed since the last flush; bound: as consumers and partitions.
	changed      map[string]map[int]bool
	drainChanged map[string]bool
	removed      map[string]bool

	fsyncs, written, compactions atomic.Uint64
}

// OffsetStats count the offset journal's I/O.
type OffsetStats struct {
	Fsyncs, WrittenBytes, Compactions uint64
	JournalBytes                      int64
}

func openOffsetStore(dir string, lazy time.Duration) (*OffsetStore, error) {
	s := &OffsetStore{dir: dir, path: filepath.Join(dir, offsetsLogFile), lazy: lazy,
		consumers: map[string]map[int]uint64{}, drained: map[string]bool{},
		changed: map[string]map[int]bool{}, drainChanged: map[string]bool{}, removed: map[string]bool{}}
	_ = os.Remove(s.path + ".tmp") // a compaction cut short
	data, err := os.ReadFile(s.path)
	switch {
	case err == nil:
		st, valid := replayOffsets(data)
		s.consumers, s.drained = st.consumers, st.drained
		if valid < len(data) {
			// A torn or zero-filled tail: cut it, so appends follow good frames.
			if err := truncateSync(s.path, int64(valid)); err != nil {
				return nil, fmt.Errorf("wal: repair %s: %w", s.path, err)
			}
		}
		s.size, s.snapSize = int64(valid), int64(valid)
		if err := os.Remove(filepath.Join(dir, offsetsFile)); err == nil {
			// Left over from a conversion cut short: the journal has it all.
			if err := fsutil.SyncDir(dir); err != nil {
				return nil, err
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if err := s.convertJSON(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("wal: read offsets: %w", err)
	}
	s.f, err = os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", s.path, err)
	}
	if s.size == 0 {
		if err := fsutil.SyncDir(dir); err != nil { // a new journal's directory entry
			_ = s.f.Close()
			return nil, err
		}
	}
	return s, nil
}

// convertJSON reads offsets.json (older versions) if there is one, writes
// the journal from it and removes it.
func (s *OffsetStore) convertJSON() error {
	old := filepath.Join(s.dir, offsetsFile)
	data, err := os.ReadFile(old)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: read offsets: %w", err)
	}
	var doc offsetsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("wal: parse %s: %w", old, err)
	}
	for name, parts := range doc.Consumers {
		if err := checkOffsetName(name); err != nil {
			return fmt.Errorf("wal: parse %s: %w", old, err)
		}
		m := make(map[int]uint64, len(parts))
		for k, v := range parts {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 {
				return fmt.Errorf("wal: parse %s: consumer %q: bad partition %q", old, name, k)
			}
			m[p] = v
		}
		s.consumers[name] = m
	}
	for _, name := range doc.Drained {
		if _, ok := s.consumers[name]; ok {
			s.drained[name] = true
		}
	}
	snap := snapshotOffsets(s.consumers, s.drained)
	if err := fsutil.WriteFileAtomic(s.path, snap, 0o640); err != nil {
		return fmt.Errorf("wal: convert offsets: %w", err)
	}
	s.size, s.snapSize = int64(len(snap)), int64(len(snap))
	if err := os.Remove(old); err != nil {
		return fmt.Errorf("wal: convert offsets: %w", err)
	}
	return fsutil.SyncDir(s.dir)
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	terr := f.Truncate(size)
	serr := f.Sync()
	return errors.Join(terr, serr, f.Close())
}

type offsetsDoc struct {
	Version   int                          `json:"version"`
	Consumers map[string]map[string]uint64 `json:"consumers"`
	Drained   []string                     `json:"drained,omitempty"`
}

// Commit records that consumer has finished everything up to offset in
// partition. It is durable after the next Flush.
func (s *OffsetStore) Commit(consumer string, partition int, offset uint64) error {
	if err := checkOffsetName(consumer); err != nil {
		return err
	}
	if partition < 0 || partition > 1<<20 {
		return fmt.Errorf("wal: commit offset: %w: %d", ErrBadPartition, partition)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.consumers[consumer]
	if !ok {
		if len(s.consumers) >= MaxConsumers {
			return fmt.Errorf("%w (%d)", ErrTooManyConsumers, MaxConsumers)
		}
		m = map[int]uint64{}
		s.consumers[consumer] = m
	}
	if old, ok := m[partition]; !ok || old != offset {
		m[partition] = offset
		c := s.changed[consumer]
		if c == nil {
			c = map[int]bool{}
			s.changed[consumer] = c
		}
		c[partition] = true
	}
	if s.drained[consumer] {
		delete(s.drained, consumer) // someone is delivering it again
		s.drainChanged[consumer] = true
	}
	return nil
}

// SetDrained records (after the next Flush) that consumer stopped with
// nothing unfinished: nothing past its committed offsets was delivered, so
// the next run need not flag those records as possibly delivered before.
// drained false clears it (a run starts); so does any Commit.
func (s *OffsetStore) SetDrained(consumer string, drained bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.consumers[consumer]; !known || s.drained[consumer] == drained {
		return
	}
	if drained {
		s.drained[consumer] = true
	} else {
		delete(s.drained, consumer)
	}
	s.drainChanged[consumer] = true
}

// Drained reports what SetDrained recorded last.
func (s *OffsetStore) Drained(consumer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drained[consumer]
}

// Get returns the committed offset of consumer in partition.
func (s *OffsetStore) Get(consumer string, partition int) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.consumers[consumer][partition]
	return off, ok
}

// Has reports whether consumer is known.
func (s *OffsetStore) Has(consumer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.consumers[consumer]
	return ok
}

// Remove forgets consumer: it no longer holds back retention.
func (s *OffsetStore) Remove(consumer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.consumers[consumer]; ok {
		delete(s.consumers, consumer)
		delete(s.drained, consumer)
		delete(s.changed, consumer)
		delete(s.drainChanged, consumer)
		s.removed[consumer] = true
	}
}

// Consumers lists the known consumers, sorted.
func (s *OffsetStore) Consumers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.consumers))
	for name := range s.consumers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Floor is the lowest committed offset of partition over all consumers; a
// consumer that never committed the partition counts as 0. ok is false when
// there are no consumers.
func (s *OffsetStore) Floor(partition int) (floor uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.consumers {
		off := m[partition]
		if !ok || off < floor {
			floor, ok = off, true
		}
	}
	return floor, ok
}

// Flush makes the commits durable: what changed is appended to the journal,
// which is fsynced.
func (s *OffsetStore) Flush() error { return s.flush(true) }

// FlushLazy appends what changed to the journal without waiting for an
// fsync: the journal is fsynced within lazy_sync (or by the next Flush). A
// power cut may lose those commits (the records are delivered again:
// at-least-once); a crash of the process does not.
func (s *OffsetStore) FlushLazy() error { return s.flush(false) }

func (s *OffsetStore) flush(sync bool) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.mu.Lock()
	buf := s.encodeChanges()
	var snap []byte
	if s.broken || (len(buf) > 0 && s.size+int64(len(buf)) > max(offsetsCompactMin, 4*s.snapSize)) {
		snap = snapshotOffsets(s.consumers, s.drained)
	}
	s.mu.Unlock()
	if snap != nil {
		if err := s.rewrite(snap); err != nil {
			return err
		}
		return nil
	}
	if len(buf) > 0 {
		n, err := s.f.Write(buf)
		s.written.Add(uint64(n))
		s.size += int64(n)
		if err != nil {
			// A torn frame may sit at the tail now: rewrite it all next time.
			s.broken = true
			return fmt.Errorf("wal: flush offsets: %w", err)
		}
		s.unsynced = true
	}
	if !s.unsynced {
		return nil
	}
	if sync {
		return s.syncLocked()
	}
	if !s.armed { // one timer, armed only while unsynced commits wait for it
		if s.timer == nil {
			s.timer = time.AfterFunc(s.lazy, s.lazySync)
		} else {
			s.timer.Reset(s.lazy)
		}
		s.armed = true
	}
	return nil
}

func (s *OffsetStore) lazySync() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.armed = false
	if s.closed || !s.unsynced {
		return
	}
	if err := s.syncLocked(); err != nil {
		slog.Default().Error("fsync offsets journal", "err", err)
	}
}

func (s *OffsetStore) syncLocked() error {
	s.fsyncs.Add(1)
	if err := s.f.Sync(); err != nil {
		s.broken = true // the page cache may have dropped it: rewrite next time
		return fmt.Errorf("wal: fsync offsets: %w", err)
	}
	s.unsynced = false
	return nil
}

// rewrite replaces the journal with a snapshot (compaction, or repair
// after a failed write): temp file, fsync, rename, fsync of the directory.
func (s *OffsetStore) rewrite(snap []byte) error {
	if err := fsutil.WriteFileAtomic(s.path, snap, 0o640); err != nil {
		s.broken = true
		return fmt.Errorf("wal: compact offsets: %w", err)
	}
	s.fsyncs.Add(2)
	s.written.Add(uint64(len(snap)))
	s.compactions.Add(1)
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		s.broken = true
		return fmt.Errorf("wal: reopen %s: %w", s.path, err)
	}
	_ = s.f.Close()
	s.f = f
	s.size, s.snapSize = int64(len(snap)), int64(len(snap))
	s.broken, s.unsynced = false, false
	return nil
}

// encodeChanges encodes what changed since the last flush and forgets it
// (s.mu held): removals first, then offsets, then drained flags.
func (s *OffsetStore) encodeChanges() []byte {
	var buf []byte
	for name := range s.removed {
		buf = appendOffsetFrame(buf, opRemove, name)
	}
	for name, parts := range s.changed {
		m := s.consumers[name]
		for p := range parts {
			buf = appendOffsetFrame(buf, opCommit, name, uint64(p), m[p])
		}
	}
	for name := range s.drainChanged {
		var v uint64
		if s.drained[name] {
			v = 1
		}
		buf = appendOffsetFrame(buf, opDrained, name, v)
	}
	clear(s.removed)
	clear(s.changed)
	clear(s.drainChanged)
	return buf
}

// close makes everything durable and closes the journal.
func (s *OffsetStore) close() error {
	err := s.Flush()
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return errors.Join(err, s.f.Close())
}

// Stats counts the journal's I/O.
func (s *OffsetStore) Stats() OffsetStats {
	s.flushMu.Lock()
	size := s.size
	s.flushMu.Unlock()
	return OffsetStats{Fsyncs: s.fsyncs.Load(), WrittenBytes: s.written.Load(), Compactions: s.compactions.Load(), JournalBytes: size}
}
