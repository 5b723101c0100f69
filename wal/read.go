package wal

import (
	"errors"
	"fmt"

	twal "github.com/tidwall/wal"
)

// Entry is one record read from a partition. Record's strings and payload alias
// Raw, which belongs to the batch and is never reused by the log.
type Entry struct {
	Offset uint64
	Raw    []byte // the encoded record, as stored
	Record Record
}

// Batch is the result of one Read.
type Batch struct {
	Entries []Entry
	// Next is the offset to read next.
	Next uint64
	// Lost counts offsets before the first entry that retention had removed.
	Lost uint64
	// Corrupt counts records skipped because their CRC failed or their
	// segment could not be parsed.
	Corrupt uint64
}

// Read returns records of partition p from offset from on: at most maxRecords
// and about maxBytes (always at least one record when one is there), never past
// the durable high-water mark. An empty batch means nothing durable is there
// yet: wait on Notify. Reads of one partition are serialized with each other
// (tidwall's concurrent Reads are unsafe, GOTCHAS 1.6).
func (l *Log) Read(p int, from uint64, maxRecords, maxBytes int) (Batch, error) {
	pt, err := l.part(p)
	if err != nil {
		return Batch{}, err
	}
	if from == 0 {
		from = 1
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var b Batch
	if first := pt.first.Load(); from < first {
		b.Lost = first - from
		from = first
	}
	hwm := pt.durable.Load()
	var raws [][]byte
	var offs []uint64
	size := 0
	off := from
	for off <= hwm && len(raws) < maxRecords && (size < maxBytes || len(raws) == 0) {
		data, err := pt.log.Read(off)
		if errors.Is(err, twal.ErrCorrupt) {
			// A non-tail segment whose frames do not parse: skip all of it.
			next, serr := nextSegmentStart(pt.dir, off)
			if serr != nil {
				return b, fmt.Errorf("wal: read partition %d at %d: %w", p, off, err)
			}
			pt.stats.corrupt.Add(next - off)
			b.Corrupt += next - off
			pt.logger.Error("unreadable segment skipped", "from", off, "to", next-1)
			off = next
			continue
		}
		if errors.Is(err, twal.ErrNotFound) {
			break // truncated by retention meanwhile; the next Read reports it
		}
		if err != nil {
			return b, fmt.Errorf("wal: read partition %d at %d: %w", p, off, err)
		}
		raws = append(raws, data) // aliases tidwall's buffer until copied below
		offs = append(offs, off)
		size += len(data)
		off++
	}
	b.Next = off
	if len(raws) == 0 {
		return b, nil
	}
	// One fresh buffer per batch: decoded strings alias it, so it is never reused.
	buf := make([]byte, 0, size)
	for _, r := range raws {
		buf = append(buf, r...)
	}
	b.Entries = make([]Entry, 0, len(raws))
	pos := 0
	for i, r := range raws {
		raw := buf[pos : pos+len(r) : pos+len(r)]
		pos += len(r)
		e := Entry{Offset: offs[i], Raw: raw}
		if err := DecodeRecord(raw, &e.Record); err != nil {
			pt.stats.corrupt.Add(1)
			b.Corrupt++
			pt.logger.Error("corrupt record skipped", "offset", offs[i], "err", err)
			continue
		}
		b.Entries = append(b.Entries, e)
	}
	return b, nil
}

// nextSegmentStart returns the first index of the segment after the one that
// holds off.
func nextSegmentStart(dir string, off uint64) (uint64, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return 0, err
	}
	for _, s := range segs {
		if s.first > off {
			return s.first, nil
		}
	}
	return 0, fmt.Errorf("no segment after offset %d", off)
}
