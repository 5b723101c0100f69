package jsapi

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"edgeq/wal"
)

// The last-value index: device -> position of its newest data record, what
// a message get by last_by_subj, a direct get of a subject, a KV get and a
// last_per_subject consumer need. The log's device table keeps sequence
// numbers and routing, not positions, so the index follows the log itself:
// one reader per partition (wal.Log.Read, as the live tail reads), from the
// partition's first record on. It starts on first use, so a node whose
// clients never ask pays nothing; until it has caught up with what was
// durable when it started, a lookup it cannot answer reads back through the
// device's partitions (wal.Log.DeviceTail, bounded by lastScanBytes).
//
// Bounded: one entry per device, at most wal's max_devices (the log refuses
// more devices), about 100 bytes each; edgeq_jetstream_last_index_devices.

// LastLog is what the index reads of the log.
type LastLog interface {
	Records
	NumPartitions() int
	Notify(p int) <-chan struct{}
	Device(device string) (wal.DeviceInfo, bool)
	HomePartition(device string) int
	HotPartition(device string) int
	DeviceTail(p int, device string, n, maxBytes int) ([]wal.Entry, wal.TailScan, error)
}

var _ LastLog = (*wal.Log)(nil)

// lastScanBytes bounds the read-back of one lookup the index cannot answer
// yet (per partition of the device).
const lastScanBytes = 8 << 20

// lastReadRecords is how many records the index reads at once.
const lastReadRecords = 512

// LastPos is where a device's newest data record is.
type LastPos struct {
	Partition int
	Offset    uint64
	Seq       uint64 // the device's sequence of that record
}

// LastIndex maps devices to their newest data record.
type LastIndex struct {
	log    LastLog
	max    int
	logger *slog.Logger

	want     chan struct{} // closed on first use
	wantOnce sync.Once

	mu     sync.Mutex
	m      map[string]LastPos // bound: max
	next   []uint64           // per partition: the next offset to index
	target []uint64           // per partition: durable when the index started
	caught int                // partitions that reached target

	Dropped atomic.Uint64 // devices not indexed: the bound was reached
}

// NewLastIndex returns an index over l holding at most max devices.
func NewLastIndex(l LastLog, max int, logger *slog.Logger) *LastIndex {
	if max <= 0 {
		max = 100_000
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &LastIndex{log: l, max: max, logger: logger, want: make(chan struct{}), m: map[string]LastPos{}}
}

// Len is the number of devices indexed.
func (x *LastIndex) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.m)
}

// Started reports whether the index is in use (and so following the log).
func (x *LastIndex) Started() bool {
	select {
	case <-x.want:
		return true
	default:
		return false
	}
}

// use starts the index (Run's followers) on first use.
func (x *LastIndex) use() { x.wantOnce.Do(func() { close(x.want) }) }

// Run follows every partition once the index is first used, until ctx ends.
func (x *LastIndex) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-x.want:
	}
	n := x.log.NumPartitions()
	x.mu.Lock()
	x.next, x.target = make([]uint64, n), make([]uint64, n)
	for p := range n {
		x.next[p], x.target[p] = max(x.log.First(p), 1), x.log.Durable(p)
		if x.target[p] < x.next[p] {
			x.caught++
		}
	}
	x.mu.Unlock()
	var wg sync.WaitGroup
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.follow(ctx, p)
		}()
	}
	wg.Wait()
}

func (x *LastIndex) follow(ctx context.Context, p int) {
	x.mu.Lock()
	next := x.next[p]
	x.mu.Unlock()
	for {
		wake := x.log.Notify(p)
		for next <= x.log.Durable(p) {
			b, err := x.log.Read(p, next, lastReadRecords, 1<<20)
			if err != nil {
				x.logger.Error("last-value index: read", "partition", p, "err", err)
				break
			}
			if b.Next <= next {
				break
			}
			x.add(p, b.Entries, b.Next)
			next = b.Next
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// add indexes es, read from partition p up to next.
func (x *LastIndex) add(p int, es []wal.Entry, next uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range es {
		e := &es[i]
		if e.Record.Kind != wal.KindData {
			continue
		}
		x.putLocked(e.Record.Device, LastPos{Partition: p, Offset: e.Offset, Seq: e.Record.Seq})
	}
	before := x.next[p] <= x.target[p]
	x.next[p] = next
	if before && next > x.target[p] {
		x.caught++
	}
}

// putLocked keeps pos for device unless a newer record of it is known (a
// device that moved between partitions is indexed by two readers).
func (x *LastIndex) putLocked(device string, pos LastPos) {
	old, ok := x.m[device]
	switch {
	case ok && old.Seq > pos.Seq:
	case ok:
		x.m[device] = pos
	case len(x.m) >= x.max:
		x.Dropped.Add(1)
	default:
		x.m[strings.Clone(device)] = pos // e.Record's strings alias the batch
	}
}

// ready reports whether the index has caught up with the log as it was at
// its start: from then on it knows every device the log holds.
func (x *LastIndex) readyLocked() bool { return x.next != nil && x.caught == len(x.next) }

// Ready reports whether the index has caught up (after first use).
func (x *LastIndex) Ready() bool {
	x.use()
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.readyLocked()
}

// Last returns where device's newest durable data record is; false when
// the log holds none (or the index is not ready and the read-back within
// its budget found none).
func (x *LastIndex) Last(device string) (LastPos, bool) {
	x.use()
	x.mu.Lock()
	pos, ok := x.m[device]
	ready := x.readyLocked()
	x.mu.Unlock()
	if ok || ready && x.Dropped.Load() == 0 {
		return pos, ok
	}
	return x.scan(device) // not caught up yet, or the device did not fit
}

// scan reads back through the device's partitions for its newest record.
func (x *LastIndex) scan(device string) (LastPos, bool) {
	info, known := x.log.Device(device)
	if !known {
		return LastPos{}, false
	}
	parts := []int{info.Partition}
	for _, p := range []int{info.Home, x.log.HotPartition(device)} {
		if p >= 0 && p != info.Partition && info.Moves > 0 {
			parts = append(parts, p)
		}
	}
	var best LastPos
	found := false
	for _, p := range parts {
		es, _, err := x.log.DeviceTail(p, device, 4, lastScanBytes)
		if err != nil {
			continue
		}
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Record.Kind != wal.KindData {
				continue
			}
			if !found || es[i].Record.Seq > best.Seq {
				best, found = LastPos{Partition: p, Offset: es[i].Offset, Seq: es[i].Record.Seq}, true
			}
			break
		}
	}
	if found {
		x.mu.Lock()
		if _, in := x.m[device]; in || len(x.m) < x.max {
			x.putLocked(device, best)
		}
		x.mu.Unlock()
	}
	return best, found
}

// Snapshot returns the newest record of every device that match accepts,
// in stream-sequence order, and per partition the offset the index has
// reached (a reader that goes on from there misses nothing after them).
// ok is false while the index has not caught up.
func (x *LastIndex) Snapshot(match func(device string) bool, seq func(p int, off uint64) uint64) (pos []LastPos, next []uint64, ok bool) {
	x.use()
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.readyLocked() {
		return nil, nil, false
	}
	for d, p := range x.m {
		if match(d) {
			pos = append(pos, p)
		}
	}
	sort.Slice(pos, func(i, j int) bool {
		return seq(pos[i].Partition, pos[i].Offset) < seq(pos[j].Partition, pos[j].Offset)
	})
	return pos, append([]uint64(nil), x.next...), true
}
