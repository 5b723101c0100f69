package wal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fileState is what a test remembers of a file: its inode says whether it was
// rewritten or replaced by a rename.
type fileState struct {
	ino   uint64
	size  int64
	mtime time.Time
}

func dirState(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]fileState)
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			t.Skip("no inode numbers on this platform")
		}
		out[e.Name()] = fileState{ino: st.Ino, size: info.Size(), mtime: info.ModTime()}
	}
	return out
}

// twalSegments is the length of tidwall's in-memory segment list (an
// unexported field; reflect may read its length).
func twalSegments(p *partition) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return reflect.ValueOf(p.log).Elem().FieldByName("segments").Len()
}

// Retention removes whole segment files and leaves every other file exactly
// as it was: no copy, no rename, no temporary file. tidwall's handle forgets
// the removed segments at the next roll.
func TestRetentionDeletesWithoutCopy(t *testing.T) {
	o := retentionOptions()
	o.Durability = DurabilityNone // retention does not depend on it; appends are faster
	o.MaxBytes = 300 << 10        // about 4.5 segments of 64 KiB
	dir := t.TempDir()
	l := openTest(t, dir, o)
	defer l.Close()
	p := l.parts[0]
	pdir := p.dir
	appendN(t, l, "dev", 5000) // ~800 KiB, 12-13 segments
	if err := l.Offsets().Commit("g", 0, 5000); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, pdir)
	segsBefore, err := listSegments(pdir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.EnforceRetention()
	if err != nil {
		t.Fatal(err)
	}
	if res.RemovedSegments == 0 || res.Dropped != 0 {
		t.Fatalf("retention result %+v", res)
	}
	after := dirState(t, pdir)
	for name, st := range after {
		old, ok := before[name]
		if !ok {
			t.Errorf("retention created %s", name)
			continue
		}
		if st != old {
			t.Errorf("retention changed %s: %+v, was %+v", name, st, old)
		}
	}
	// Exactly the oldest segments went, and the new first offset is the
	// first index of the oldest one kept.
	for i, s := range segsBefore {
		_, kept := after[filepath.Base(s.path)]
		if removed := i < res.RemovedSegments; removed == kept {
			t.Errorf("segment %d (%s): kept %v, want removed %v", i, filepath.Base(s.path), kept, removed)
		}
	}
	if want := segsBefore[res.RemovedSegments].first; l.First(0) != want {
		t.Fatalf("first offset %d, want %d", l.First(0), want)
	}
	if l.TotalBytes() > o.MaxBytes {
		t.Fatalf("%d bytes left, budget %d", l.TotalBytes(), o.MaxBytes)
	}

	// tidwall still lists the removed segments until the next roll.
	if n := twalSegments(p); n != len(segsBefore) {
		t.Fatalf("tidwall lists %d segments before the roll, want the %d it had", n, len(segsBefore))
	}
	// Append until the tail rolls (several times), with retention between:
	// the list stays as long as the files on disk.
	next := 5000
	for round := 0; round < 6; round++ {
		rolls := p.stats.reopens.Load()
		for i := 0; p.stats.reopens.Load() == rolls; i++ {
			if i > 2000 {
				t.Fatalf("round %d: no reopen after %d appends", round, i)
			}
			if _, err := l.Append(context.Background(), &Record{Device: "dev", Source: "test", Payload: payloadFor("dev", next)}); err != nil {
				t.Fatal(err)
			}
			next++
		}
		segs, err := listSegments(pdir)
		if err != nil {
			t.Fatal(err)
		}
		if n := twalSegments(p); n != len(segs) {
			t.Fatalf("round %d: tidwall lists %d segments, %d on disk", round, n, len(segs))
		}
		if err := l.Offsets().Commit("g", 0, p.last.Load()); err != nil {
			t.Fatal(err)
		}
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
	}
	// Everything from the first offset on reads back.
	entries := readAll(t, l, 0)
	if len(entries) == 0 || entries[0].Offset != l.First(0) || entries[len(entries)-1].Offset != p.last.Load() {
		t.Fatalf("read %d entries; first %d last %d", len(entries), l.First(0), p.last.Load())
	}
	for i, e := range entries {
		if e.Offset != l.First(0)+uint64(i) {
			t.Fatalf("entry %d has offset %d", i, e.Offset)
		}
		if want := payloadFor("dev", int(e.Record.Seq-1)); string(e.Record.Payload) != string(want) {
			t.Fatalf("offset %d: payload %q, want %q", e.Offset, e.Record.Payload, want)
		}
	}
}

// Every state a crash in the middle of retention can leave opens, reads what
// is left, keeps every device's sequence and appends at the right offset:
// before anything was removed, after the device-table checkpoint, after each
// segment file removed (oldest first, over two partitions), a file removed
// but its directory entry back (a power cut before the directory fsync),
// and the leftovers of tidwall's TruncateFront from an older edgeq.
func TestRetentionCrashStates(t *testing.T) {
	o := retentionOptions()
	o.Durability = DurabilityNone // the copies are taken from the page cache anyway
	o.Partitions = 2
	o.MaxBytes = 200 << 10
	dir := t.TempDir()
	l := openTest(t, dir, o)
	// Devices over both partitions; "early-*" only write at the start, so
	// retention removes all their records.
	var devs []string
	for i := 0; i < 8; i++ {
		devs = append(devs, fmt.Sprintf("early-%d", i))
	}
	for _, d := range devs {
		appendN(t, l, d, 5)
	}
	for i := 0; i < 4000; i++ {
		appendN(t, l, fmt.Sprintf("dev-%d", i%10), 1)
	}
	for p := 0; p < l.NumPartitions(); p++ {
		if err := l.Offsets().Commit("g", p, l.parts[p].last.Load()); err != nil {
			t.Fatal(err)
		}
	}
	// What every record is, by partition and offset, and each device's last seq.
	type rec struct {
		device  string
		seq     uint64
		payload string
	}
	all := make([]map[uint64]rec, l.NumPartitions())
	lastSeq := map[string]uint64{}
	for p := range all {
		all[p] = map[uint64]rec{}
		for _, e := range readAll(t, l, p) {
			all[p][e.Offset] = rec{e.Record.Device, e.Record.Seq, string(e.Record.Payload)}
			lastSeq[e.Record.Device] = max(lastSeq[e.Record.Device], e.Record.Seq)
		}
	}
	lastOff := make([]uint64, l.NumPartitions())
	for p := range lastOff {
		lastOff[p] = l.parts[p].last.Load()
	}
	if err := l.Offsets().Flush(); err != nil {
		t.Fatal(err)
	}

	// Copy the data directory at every step: the states a kill -9 leaves
	// (the page cache survives; each removal was fsynced before the next).
	type state struct {
		name string
		dir  string
	}
	snap := func(name string) state {
		s := state{name: name, dir: filepath.Join(t.TempDir(), "data")}
		copyDir(t, dir, s.dir)
		return s
	}
	states := []state{snap("before retention")}
	var steps []string
	retentionHook = func(step string, p int) {
		steps = append(steps, fmt.Sprintf("%s p%d", step, p))
		states = append(states, snap(fmt.Sprintf("after %s (partition %d), step %d", step, p, len(steps))))
	}
	res, err := l.EnforceRetention()
	retentionHook = nil
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if res.RemovedSegments < 4 {
		t.Fatalf("retention removed only %d segments: %+v", res.RemovedSegments, res)
	}
	removedIn := map[int]bool{}
	for _, s := range steps {
		var p int
		if _, err := fmt.Sscanf(s, "removed p%d", &p); err == nil {
			removedIn[p] = true
		}
	}
	if len(removedIn) != 2 {
		t.Fatalf("retention removed segments from partitions %v, want both; steps %v", removedIn, steps)
	}

	// A power cut after a removal but before its directory fsync brings the
	// file back: the state after the previous step plus that file. Build it
	// from the last state, with the last removed file restored from the
	// first state.
	last := states[len(states)-1]
	back := state{name: "last removal undone (directory not fsynced)", dir: filepath.Join(t.TempDir(), "data")}
	copyDir(t, last.dir, back.dir)
	first := states[0]
	restored := false
	for p := 0; p < 2 && !restored; p++ {
		now, _ := listSegments(partitionDir(last.dir, p))
		was, _ := listSegments(partitionDir(first.dir, p))
		for i := len(was) - 1; i >= 0; i-- {
			if was[i].first < now[0].first {
				copyDir(t, was[i].path, filepath.Join(partitionDir(back.dir, p), filepath.Base(was[i].path)))
				restored = true
				break
			}
		}
	}
	if !restored {
		t.Fatal("no removed segment to restore")
	}
	states = append(states, back)

	// An older edgeq's TruncateFront interrupted after its START file was
	// renamed into place, before the old segments were deleted: partition 0
	// truncated in the middle of its second segment, after the checkpoint.
	old := state{name: "tidwall TruncateFront interrupted (older edgeq)", dir: filepath.Join(t.TempDir(), "data")}
	copyDir(t, states[1].dir, old.dir)
	pd := partitionDir(old.dir, 0)
	segs, _ := listSegments(pd)
	data, err := os.ReadFile(segs[1].path)
	if err != nil {
		t.Fatal(err)
	}
	_, cut := scanFrames(data, 7, nil)
	oldFirst := segs[1].first + 7
	if err := os.WriteFile(filepath.Join(pd, fmt.Sprintf("%020d.START", oldFirst)), data[cut:], 0o640); err != nil {
		t.Fatal(err)
	}
	states = append(states, old)

	for _, s := range states {
		t.Run(s.name, func(t *testing.T) {
			lastOff := append([]uint64(nil), lastOff...)
			lastSeq := maps.Clone(lastSeq)
			l := openTest(t, s.dir, o)
			defer l.Close()
			for p := 0; p < l.NumPartitions(); p++ {
				segs, err := listSegments(l.parts[p].dir)
				if err != nil {
					t.Fatal(err)
				}
				if len(segs) == 0 {
					t.Fatalf("partition %d: no segments", p)
				}
				if f := l.First(p); f != segs[0].first {
					t.Fatalf("partition %d: first offset %d, first segment %d", p, f, segs[0].first)
				}
				entries := readAll(t, l, p)
				if len(entries) == 0 {
					t.Fatalf("partition %d: nothing left", p)
				}
				for i, e := range entries {
					want, ok := all[p][e.Offset]
					if e.Offset != l.First(p)+uint64(i) || !ok {
						t.Fatalf("partition %d: entry %d at offset %d (first %d)", p, i, e.Offset, l.First(p))
					}
					if e.Record.Device != want.device || e.Record.Seq != want.seq || string(e.Record.Payload) != want.payload {
						t.Fatalf("partition %d offset %d: %s #%d, want %s #%d", p, e.Offset, e.Record.Device, e.Record.Seq, want.device, want.seq)
					}
				}
				if got := entries[len(entries)-1].Offset; got != lastOff[p] {
					t.Fatalf("partition %d: last offset %d, want %d", p, got, lastOff[p])
				}
			}
			// Appends continue every device's sequence at the right offset,
			// also for devices whose records are all gone.
			for _, d := range append(devs, "dev-0", "dev-7") {
				ps := appendN(t, l, d, 1)
				if ps[0].Seq != lastSeq[d]+1 {
					t.Fatalf("%s: seq %d after the crash, want %d", d, ps[0].Seq, lastSeq[d]+1)
				}
				if ps[0].Offset != lastOff[ps[0].Partition]+1 {
					t.Fatalf("%s: offset %d in partition %d, want %d", d, ps[0].Offset, ps[0].Partition, lastOff[ps[0].Partition]+1)
				}
				lastOff[ps[0].Partition]++
				lastSeq[d]++
			}
			// And retention goes on from there.
			for p := 0; p < l.NumPartitions(); p++ {
				if err := l.Offsets().Commit("g", p, l.parts[p].last.Load()); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			if l.TotalBytes() > o.MaxBytes {
				t.Fatalf("%d bytes after retention, budget %d", l.TotalBytes(), o.MaxBytes)
			}
		})
	}
	t.Logf("%d states; steps %v", len(states), steps)
}

// After Close, retention refuses and leaves the files alone; a run racing
// Close either finishes first or refuses.
func TestRetentionAfterClose(t *testing.T) {
	o := retentionOptions()
	o.Durability = DurabilityNone
	o.MaxBytes = 100 << 10
	dir := t.TempDir()
	l := openTest(t, dir, o)
	appendN(t, l, "dev", 3000)
	if err := l.Offsets().Commit("g", 0, 3000); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := partitionDir(dir, 0)
	before := dirState(t, pdir)
	if _, err := l.EnforceRetention(); !errors.Is(err, ErrClosed) {
		t.Fatalf("retention after close: %v, want ErrClosed", err)
	}
	if after := dirState(t, pdir); !reflect.DeepEqual(before, after) {
		t.Fatalf("retention after close changed the files:\n%v\n%v", before, after)
	}

	// Racing Close.
	for i := 0; i < 3; i++ {
		dir := t.TempDir()
		l := openTest(t, dir, o)
		appendN(t, l, "dev", 3000)
		if err := l.Offsets().Commit("g", 0, 3000); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var retErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, retErr = l.EnforceRetention()
		}()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if retErr != nil && !errors.Is(retErr, ErrClosed) {
			t.Fatalf("retention racing close: %v", retErr)
		}
		l = openTest(t, dir, o)
		entries := readAll(t, l, 0)
		if len(entries) == 0 || entries[len(entries)-1].Offset != 3000 || entries[0].Offset != l.First(0) {
			t.Fatalf("after retention racing close: %d entries from %d", len(entries), l.First(0))
		}
		l.Close()
	}
}
