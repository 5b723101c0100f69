package wal

import (
	"edgeq/internal/fsutil"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// This file reads tidwall/wal segment files directly. tidwall/wal parses only the
// last segment at open and fails on a torn frame without repairing it
// (GOTCHAS 1.1), so repair, check and the recovery scan work on the files.

// segmentFile is one tidwall/wal segment: a file named by its first index.
type segmentFile struct {
	first uint64
	path  string
	size  int64
}

// listSegments returns the segment files of dir ordered by first index. Files
// whose names are not 20 digits are not segments (tidwall's own START/END files
// are resolved by tidwall's Open, TEMP files by cleanTemp).
func listSegments(dir string) ([]segmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments in %s: %w", dir, err)
	}
	var segs []segmentFile
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || len(name) != 20 {
			continue
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil || first == 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("stat segment %s: %w", name, err)
		}
		segs = append(segs, segmentFile{first: first, path: filepath.Join(dir, name), size: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].first < segs[j].first })
	return segs, nil
}

// scanFrames walks a segment's bytes as tidwall binary frames (uvarint length +
// data), calling fn (if not nil) for each complete frame, at most limit of them.
// It returns how many frames it walked and the byte offset just past them;
// anything after a torn frame is a torn or garbage tail.
func scanFrames(data []byte, limit uint64, fn func(i uint64, frame []byte)) (count uint64, end int) {
	for end < len(data) && count < limit {
		size, n := binary.Uvarint(data[end:])
		if n <= 0 || uint64(len(data)-end-n) < size {
			break
		}
		if fn != nil {
			fn(count, data[end+n:end+n+int(size)])
		}
		end += n + int(size)
		count++
	}
	return count, end
}

// cleanTemp removes files left by a crash inside tidwall's atomicWrite
// (`*.TEMP`), which tidwall never removes itself (GOTCHAS 1.8).
func cleanTemp(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("clean temp files in %s: %w", dir, err)
	}
	removed := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".TEMP") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return removed, fmt.Errorf("remove %s: %w", e.Name(), err)
			}
			removed++
		}
	}
	if removed > 0 {
		return removed, fsutil.SyncDir(dir)
	}
	return 0, nil
}

// repairResult says what repairDir did.
type repairResult struct {
	CutBytes        int64 // bytes removed from the end of the log
	RemovedSegments int   // whole segment files removed
	Last            uint64
}

// repairDir cuts the log in dir back to at most maxIndex (math.MaxUint64: to the
// last complete frame). It only truncates and removes files, so it needs no free
// space: it is also the way back from ENOSPC. The first segment is never removed,
// only emptied, so offsets stay monotonic even when nothing is left.
func repairDir(dir string, maxIndex uint64) (repairResult, error) {
	var res repairResult
	segs, err := listSegments(dir)
	if err != nil || len(segs) == 0 {
		return res, err
	}
	keep := 1
	for keep < len(segs) && segs[keep].first <= maxIndex {
		keep++
	}
	for _, s := range segs[keep:] {
		if err := os.Remove(s.path); err != nil {
			return res, fmt.Errorf("repair: remove segment %s: %w", s.path, err)
		}
		res.CutBytes += s.size
		res.RemovedSegments++
	}
	last := segs[keep-1]
	data, err := os.ReadFile(last.path)
	if err != nil {
		return res, fmt.Errorf("repair: read %s: %w", last.path, err)
	}
	limit := uint64(math.MaxUint64)
	if maxIndex != math.MaxUint64 {
		limit = 0
		if maxIndex+1 >= last.first {
			limit = maxIndex + 1 - last.first
		}
	}
	count, end := scanFrames(data, limit, nil)
	res.Last = last.first + count - 1
	if int64(end) < int64(len(data)) {
		f, err := os.OpenFile(last.path, os.O_WRONLY, 0)
		if err != nil {
			return res, fmt.Errorf("repair: open %s: %w", last.path, err)
		}
		terr := f.Truncate(int64(end))
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(terr, serr, cerr); err != nil {
			return res, fmt.Errorf("repair: truncate %s: %w", last.path, err)
		}
		res.CutBytes += int64(len(data) - end)
	}
	if res.CutBytes > 0 {
		if err := fsutil.SyncDir(dir); err != nil {
			return res, err
		}
	}
	return res, nil
}
