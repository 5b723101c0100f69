package wal

import (
	"edgeq/internal/fsutil"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

// MaxConsumers bounds the consumers an OffsetStore keeps.
const MaxConsumers = 4096

const offsetsFile = "offsets.json"

// ErrTooManyConsumers is returned by Commit when MaxConsumers are known.
var ErrTooManyConsumers = errors.New("wal: too many consumers in the offset store")

// OffsetStore keeps each consumer's committed offset per partition: everything
// at or below it is finished for that consumer. Commits are held in memory and
// made durable by Flush (atomic replace, fsync of file and directory).
// Retention never truncates past the lowest committed offset of any consumer.
type OffsetStore struct {
	path string

	flushMu   sync.Mutex // one file write at a time
	mu        sync.Mutex
	consumers map[string]map[int]uint64
	drained   map[string]bool // consumers whose last run stopped with nothing unfinished; bound: as consumers
	dirty     bool
}

type offsetsDoc struct {
	Version   int                          `json:"version"`
	Consumers map[string]map[string]uint64 `json:"consumers"`
	Drained   []string                     `json:"drained,omitempty"`
}

func openOffsetStore(dir string) (*OffsetStore, error) {
	s := &OffsetStore{path: filepath.Join(dir, offsetsFile), consumers: map[string]map[int]uint64{}, drained: map[string]bool{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read offsets: %w", err)
	}
	var doc offsetsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("wal: parse %s: %w", s.path, err)
	}
	for name, parts := range doc.Consumers {
		m := make(map[int]uint64, len(parts))
		for k, v := range parts {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 {
				return nil, fmt.Errorf("wal: parse %s: consumer %q: bad partition %q", s.path, name, k)
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
	return s, nil
}

// Commit records that consumer has finished everything up to offset in
// partition. It is durable after the next Flush.
func (s *OffsetStore) Commit(consumer string, partition int, offset uint64) error {
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
		s.dirty = true
	}
	if s.drained[consumer] {
		delete(s.drained, consumer) // someone is delivering it again
		s.dirty = true
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
	s.dirty = true
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
		s.dirty = true
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

// Flush makes the commits durable if anything changed.
func (s *OffsetStore) Flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	doc := offsetsDoc{Version: 1, Consumers: make(map[string]map[string]uint64, len(s.consumers))}
	for name, m := range s.consumers {
		parts := make(map[string]uint64, len(m))
		for p, off := range m {
			parts[strconv.Itoa(p)] = off
		}
		doc.Consumers[name] = parts
	}
	for name := range s.drained {
		doc.Drained = append(doc.Drained, name)
	}
	sort.Strings(doc.Drained)
	s.dirty = false
	s.mu.Unlock()
	data, err := json.MarshalIndent(doc, "", " ")
	if err == nil {
		err = fsutil.WriteFileAtomic(s.path, data, 0o640)
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("wal: flush offsets: %w", err)
	}
	return nil
}
