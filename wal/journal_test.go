package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A round is one journal fsync whatever the number of partitions: acked
// records the partition files lost (their tails cut, zero-filled, or the
// whole tail segment gone) come back from the journal at open; a torn
// journal tail costs only the records nobody was told about.
func TestJournalPowerCut(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = 2 * time.Millisecond
	dir := t.TempDir()
	l := openTest(t, dir, o)
	var acked []Position
	for i := 0; i < 300; i++ {
		pos, err := l.Append(context.Background(), &Record{Device: fmt.Sprintf("dev-%02d", i%30), Payload: payloadFor("j", i)})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, pos)
	}
	st := l.Stats().Commit
	if st.JournalFsyncs == 0 || st.Fsyncs != st.JournalFsyncs {
		t.Fatalf("rounds did not go through the journal alone: %+v", st)
	}
	if st.JournalFsyncs > st.Rounds {
		t.Fatalf("%d journal fsyncs in %d rounds", st.JournalFsyncs, st.Rounds)
	}
	for name, damage := range map[string]func(t *testing.T, pdir string){
		"tails cut": func(t *testing.T, pdir string) {
			segs, _ := listSegments(pdir)
			last := segs[len(segs)-1]
			if err := os.Truncate(last.path, last.size/3); err != nil {
				t.Fatal(err)
			}
		},
		"tails zero-filled": func(t *testing.T, pdir string) {
			segs, _ := listSegments(pdir)
			last := segs[len(segs)-1]
			f, err := os.OpenFile(last.path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, last.size/2), last.size/2); err != nil {
				t.Fatal(err)
			}
		},
		"a hole in the tails, valid records after it": func(t *testing.T, pdir string) {
			segs, _ := listSegments(pdir)
			last := segs[len(segs)-1]
			f, err := os.OpenFile(last.path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, last.size/3), last.size/3); err != nil {
				t.Fatal(err)
			}
		},
		"tail segments gone": func(t *testing.T, pdir string) {
			segs, _ := listSegments(pdir)
			if err := os.Truncate(segs[len(segs)-1].path, 0); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cp := t.TempDir()
			copyDir(t, dir, cp)
			for p := 0; p < o.TotalPartitions(); p++ {
				damage(t, partitionDir(cp, p))
			}
			// A torn journal tail too: garbage after its last entry.
			jsegs, err := listSegments(filepath.Join(cp, journalDir))
			if err != nil || len(jsegs) == 0 {
				t.Fatalf("no journal segments: %v", err)
			}
			f, err := os.OpenFile(jsegs[len(jsegs)-1].path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write([]byte("\x20garbage that is not a journal entry"))
			f.Close()
			// wal check predicts what open restores.
			check, err := Check(cp, o, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, pos := range acked {
				if got := check.Partitions[pos.Partition].OpenLast; got < pos.Offset {
					t.Fatalf("check: partition %d ends at %d after open, acked %+v", pos.Partition, got, pos)
				}
			}
			r := openTest(t, cp, o)
			defer r.Close()
			if rep := r.Report().Journal; rep.Replayed == 0 || rep.Gaps != 0 {
				t.Fatalf("journal report %+v", rep)
			}

			byPart := map[int][]Entry{}
			for p := 0; p < r.NumPartitions(); p++ {
				byPart[p] = readAll(t, r, p)
			}
			for i, pos := range acked {
				es := byPart[pos.Partition]
				idx := int(pos.Offset) - 1
				if idx >= len(es) || string(es[idx].Record.Payload) != string(payloadFor("j", i)) {
					t.Fatalf("acked record %d at %+v lost after the cut (partition has %d)", i, pos, len(es))
				}
			}
			// The journal is empty after open, and new appends follow.
			if segs, _ := listSegments(filepath.Join(cp, journalDir)); len(segs) > 1 || (len(segs) == 1 && segs[0].size > 0) {
				t.Fatalf("journal not emptied after replay: %+v", segs)
			}
			if _, err := r.Append(context.Background(), &Record{Device: "dev-00", Payload: []byte("after")}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs, _ := listSegments(filepath.Join(dir, journalDir)); len(segs) > 1 || (len(segs) == 1 && segs[0].size > 0) {
		t.Fatalf("journal not emptied by Close: %+v", segs)
	}
}

// Past journalCheckpoint the partitions are fsynced and the journal emptied.
func TestJournalCheckpoint(t *testing.T) {
	o := testOptions()
	o.Durability = DurabilityInterval
	o.FsyncInterval = time.Millisecond
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	payload := make([]byte, 8<<10)
	for i := 0; i < 2*journalCheckpoint/len(payload)+10; i++ {
		if _, err := l.Append(context.Background(), &Record{Device: fmt.Sprintf("dev-%d", i%7), Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats().Commit
	if st.Checkpoints == 0 {
		t.Fatalf("no checkpoint after %d bytes: %+v", 2*journalCheckpoint, st)
	}
	if st.Fsyncs <= st.JournalFsyncs {
		t.Fatalf("a checkpoint fsyncs the partitions: %+v", st)
	}
}
