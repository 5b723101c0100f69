package jsapi

import (
	"time"

	"edgeq/wal"
)

// Where a consumer created with deliver_policy by_start_sequence or
// by_start_time starts: for each partition, the offset its group has
// finished (it delivers from the next one on). gateway/groups keeps the
// result within what is stored.

// StartBySeq starts at stream sequence seq: every record whose sequence
// (offset<<11 | partition) is seq or more. In partition p that is from
// offset seq>>11 on, or the one after when p is below seq's partition.
func StartBySeq(seq uint64) func(partition int) uint64 {
	sp, so := SplitSeq(seq)
	return func(p int) uint64 {
		first := so
		if p < sp {
			first++
		}
		return max(first, 1) - 1
	}
}

// Records reads records' times: what StartByTime needs of the log.
type Records interface {
	First(p int) uint64
	Durable(p int) uint64
	Read(p int, from uint64, maxRecords, maxBytes int) (wal.Batch, error)
}

var _ Records = (*wal.Log)(nil)

// timeProbe is how many records a probe reads to find one that carries
// data (move markers are skipped).
const timeProbe = 8

// StartByTime starts at the first record of each partition ingested at t
// or later: a binary search on ingest times, which grow with the offset
// within a partition (a clock stepped back makes the answer approximate
// around the step). A partition whose records are all older starts with
// the next record appended.
func StartByTime(l Records, t time.Time) func(partition int) uint64 {
	at := t.UnixNano()
	return func(p int) uint64 {
		lo, hi := l.First(p), l.Durable(p)+1 // answer in [lo, hi]
		for lo < hi {
			mid := lo + (hi-lo)/2
			tm, next, ok := probeTime(l, p, mid)
			switch {
			case !ok: // nothing readable from mid on (retention, corruption)
				hi = mid
			case tm >= at:
				hi = mid
			default:
				lo = max(next, mid+1)
			}
		}
		return max(lo, 1) - 1
	}
}

// probeTime is the ingest time of the first data record at or after off,
// and the offset after it; ok false if there is none before the durable end.
func probeTime(l Records, p int, off uint64) (t int64, next uint64, ok bool) {
	for off <= l.Durable(p) {
		b, err := l.Read(p, off, timeProbe, 1<<20)
		if err != nil || len(b.Entries) == 0 {
			return 0, 0, false
		}
		for _, e := range b.Entries {
			if e.Record.Kind == wal.KindData {
				return e.Record.Time, e.Offset + 1, true
			}
		}
		off = b.Next
	}
	return 0, 0, false
}
