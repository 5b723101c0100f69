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
	return rep, nil
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
