package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
)

// CheckReport describes a data directory as `edgeq wal check` prints it.
type CheckReport struct {
	Dir        string
	Partitions []PartitionCheck
	Repaired   bool
	InUse      bool // another process holds the directory lock
}

// PartitionCheck is one partition's part of a CheckReport.
type PartitionCheck struct {
	Partition   int
	Segments    int
	Bytes       int64
	Records     uint64 // valid records
	First, Last uint64 // first and last index of the stored frames (0, 0 when empty)
	BadRecords  uint64 // frames whose record fails its CRC or does not decode
	TornBytes   int64  // bytes after the last complete frame of the last segment
	BadTail     uint64 // bad records at the very end (cut by a repair)
	Unreadable  int    // non-tail segments whose frames do not parse
	Devices     int    // distinct devices in the stored records
	MoveMarkers uint64
	// OpenLast is the last offset the next open will have: the valid
	// records (or, when the tail segment is empty, the index before its
	// first) plus what the commit journal restores.
	OpenLast uint64
}

// Healthy reports whether nothing needs repair or was skipped.
func (c PartitionCheck) Healthy() bool {
	return c.BadRecords == 0 && c.TornBytes == 0 && c.Unreadable == 0
}

// Check inspects the log in dir without changing it. With repair it opens the
// log instead, which repairs torn and garbage tails, and reports the result.
// Repair refuses a directory another process holds.
func Check(dir string, opts Options, repair bool) (CheckReport, error) {
	rep := CheckReport{Dir: dir}
	if _, err := os.Stat(filepath.Join(dir, metaFile)); err != nil {
		return rep, fmt.Errorf("wal: %s is not an edgeq data directory: %w", dir, err)
	}
	var m meta
	if err := readJSON(filepath.Join(dir, metaFile), &m); err != nil {
		return rep, err
	}
	opts.Partitions, opts.HotPartitions = m.Partitions, m.HotPartitions
	if repair {
		l, err := Open(dir, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return rep, err
		}
		for _, pr := range l.Report().Partitions {
			rep.Repaired = rep.Repaired || pr.Repaired()
		}
		if err := l.Close(); err != nil {
			return rep, err
		}
	} else if lock, err := lockDir(dir); errors.Is(err, ErrLocked) {
		rep.InUse = true
	} else if err == nil {
		_ = lock.Close()
	}
	for i := 0; i < m.Partitions+m.HotPartitions; i++ {
		pc, err := checkPartition(partitionDir(dir, i))
		pc.Partition = i
		if err != nil {
			return rep, fmt.Errorf("wal: check partition %d: %w", i, err)
		}
		rep.Partitions = append(rep.Partitions, pc)
	}
	checkJournal(dir, rep.Partitions)
	return rep, nil
}

// checkJournal sets OpenLast: the commit journal's valid entries applied in
// order, as replayJournal would, without changing anything.
func checkJournal(dir string, parts []PartitionCheck) {
	last := make([]uint64, len(parts))
	defer func() {
		for i := range parts {
			parts[i].OpenLast = last[i]
		}
	}()
	for i, p := range parts {
		last[i] = p.Last - min(p.BadTail, p.Last)
		// An empty tail segment (retention removed the ones before it)
		// still says where the partition stands: its name is its first index.
		if ps, err := listSegments(partitionDir(dir, i)); err == nil && len(ps) > 0 {
			last[i] = max(last[i], ps[len(ps)-1].first-1)
		}
	}
	segs, err := listSegments(filepath.Join(dir, journalDir))
	if err != nil || len(segs) == 0 {
		return
	}
	gapped := map[int]bool{}
	expect := segs[0].first
	for _, s := range segs {
		if s.first != expect {
			break
		}
		data, err := os.ReadFile(s.path)
		if err != nil {
			return
		}
		bad := false
		count, _ := scanFrames(data, math.MaxUint64, func(_ uint64, frame []byte) {
			if bad {
				return
			}
			e, ok := decodeJournalEntry(frame)
			if !ok {
				bad = true
				return
			}
			if e.partition >= len(parts) || gapped[e.partition] {
				return
			}
			if e.first > last[e.partition]+1 {
				gapped[e.partition] = true
				return
			}
			last[e.partition] = max(last[e.partition], e.first+uint64(len(e.frames))-1)
		})
		if bad {
			break
		}
		expect = s.first + count
	}
}

func checkPartition(dir string) (PartitionCheck, error) {
	var pc PartitionCheck
	segs, err := listSegments(dir)
	if err != nil {
		return pc, err
	}
	pc.Segments = len(segs)
	devices := map[string]struct{}{}
	var rec Record
	for i, s := range segs {
		pc.Bytes += s.size
		data, err := readFile(s.path)
		if err != nil {
			return pc, err
		}
		var badRun uint64
		n, end := scanFrames(data, math.MaxUint64, func(k uint64, frame []byte) {
			if DecodeRecord(frame, &rec) != nil {
				pc.BadRecords++
				badRun++
				return
			}
			badRun = 0
			pc.Records++
			if rec.Kind == KindMove {
				pc.MoveMarkers++
			}
			if len(devices) < 1<<20 {
				devices[rec.Device] = struct{}{}
			}
		})
		tail := i == len(segs)-1
		if end < len(data) {
			if tail {
				pc.TornBytes = int64(len(data) - end)
			} else {
				pc.Unreadable++
			}
		}
		if tail {
			pc.BadTail = badRun
		}
		if n > 0 {
			if pc.First == 0 {
				pc.First = s.first
			}
			pc.Last = s.first + n - 1
		}
	}
	pc.Devices = len(devices)
	return pc, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("wal: read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("wal: parse %s: %w", path, err)
	}
	return nil
}
