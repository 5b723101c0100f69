package wal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func openStore(t *testing.T, dir string) *OffsetStore {
	t.Helper()
	s, err := openOffsetStore(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stateOf copies what a store holds.
func stateOf(s *OffsetStore) (map[string]map[int]uint64, map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := map[string]map[int]uint64{}
	for name, m := range s.consumers {
		c[name] = maps.Clone(m)
	}
	return c, maps.Clone(s.drained)
}

func sameState(a, b map[string]map[int]uint64) bool {
	return maps.EqualFunc(a, b, func(x, y map[int]uint64) bool { return maps.Equal(x, y) })
}

// A journal cut at every byte of its last frame, or followed by zeros or
// garbage (a power cut with the page cache half written), opens with the
// state of its complete frames, is repaired, and takes appends again.
func TestOffsetJournalTornTail(t *testing.T) {
	base := t.TempDir()
	s := openStore(t, base)
	for i := range 5 {
		if err := s.Commit(fmt.Sprintf("c%d", i%2), i%3, uint64(10+i)); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	s.SetDrained("c0", true)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	before, _ := stateOf(s) // drained set, offsets as committed
	if err := s.Commit("c1", 7, 99); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	after, _ := stateOf(s)
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(filepath.Join(base, offsetsLogFile))
	if err != nil {
		t.Fatal(err)
	}
	_, prefixLen := replayOffsets(full[:len(full)-1]) // the good frames before the last one
	tails := map[string][]byte{}
	for cut := prefixLen; cut < len(full); cut++ {
		tails[fmt.Sprintf("cut at %d of %d", cut, len(full))] = full[:cut]
	}
	tails["full"] = full
	tails["zero fill"] = append(bytes.Clone(full[:prefixLen]), make([]byte, 4096)...)
	tails["zero fill after all"] = append(bytes.Clone(full), make([]byte, 512)...)
	tails["garbage"] = append(bytes.Clone(full[:prefixLen]), []byte("\x05\x00\x00\x00garbagegarbage")...)
	flipped := bytes.Clone(full)
	flipped[len(flipped)-2] ^= 0x40 // a bad CRC in the last frame
	tails["bad crc"] = flipped
	for name, data := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, offsetsLogFile)
			if err := os.WriteFile(path, data, 0o640); err != nil {
				t.Fatal(err)
			}
			s := openStore(t, dir)
			got, drained := stateOf(s)
			want := before
			if len(data) >= len(full) && bytes.Equal(data[:len(full)], full) {
				want = after
			}
			if !sameState(got, want) || !drained["c0"] {
				t.Fatalf("state %v drained %v, want %v with c0 drained", got, drained, want)
			}
			// Repaired: the next commit follows good frames and survives.
			if err := s.Commit("c9", 1, 5); err != nil {
				t.Fatal(err)
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir)
			defer s.close()
			if off, ok := s.Get("c9", 1); !ok || off != 5 {
				t.Fatalf("commit after the repair: %d %v", off, ok)
			}
			got, _ = stateOf(s)
			delete(got, "c9")
			if !sameState(got, want) {
				t.Fatalf("after the repair and a commit: %v, want %v", got, want)
			}
		})
	}
}

// Removals, re-creation and drained flags replay in order; a journal grown
// past four times its live content is compacted to it.
func TestOffsetJournalReplayAndCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Commit("gone", 0, 3))
	must(s.Commit("back", 0, 4))
	s.SetDrained("back", true)
	must(s.Flush())
	s.Remove("gone")
	s.Remove("back")
	must(s.Commit("back", 1, 8)) // re-created within one flush
	must(s.FlushLazy())
	for i := range 5000 { // ~100 KB of commits: past the compaction threshold
		must(s.Commit("busy", i%8, uint64(i)))
		if i%8 == 7 {
			must(s.FlushLazy())
		}
	}
	must(s.Flush())
	st := s.Stats()
	if st.Compactions == 0 || st.JournalBytes > 4*offsetsCompactMin {
		t.Fatalf("journal not compacted: %+v", st)
	}
	want, _ := stateOf(s)
	must(s.close())
	s = openStore(t, dir)
	defer s.close()
	got, drained := stateOf(s)
	if !sameState(got, want) || len(drained) != 0 || s.Has("gone") {
		t.Fatalf("after reopen %v drained %v, want %v", got, drained, want)
	}
	if off, _ := s.Get("back", 1); off != 8 {
		t.Fatalf("re-created consumer: %v", got["back"])
	}
	if _, ok := s.Get("back", 0); ok {
		t.Fatal("a removed consumer's old offset came back")
	}
}

// A commit costs a small append, not a rewrite, and FlushLazy does not
// fsync; the lazy timer or the next Flush does, once.
func TestOffsetJournalLazy(t *testing.T) {
	dir := t.TempDir()
	s, err := openOffsetStore(dir, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := range 50 {
		if err := s.Commit("g", i%4, uint64(i)); err != nil {
			t.Fatal(err)
		}
		if err := s.FlushLazy(); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.WrittenBytes > 50*32 || st.Compactions != 0 {
		t.Fatalf("50 lazy commits: %+v", st)
	}
	deadline := time.Now().Add(time.Minute)
	for s.Stats().Fsyncs == 0 {
		if time.Now().After(deadline) {
			t.Fatal("lazy commits never fsynced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f := s.Stats().Fsyncs; f > 50 {
		t.Fatalf("%d fsyncs for 50 lazy commits", f)
	}
	// Nothing changed: Flush writes and fsyncs nothing.
	before := s.Stats()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if after := s.Stats(); after != before {
		t.Fatalf("an idle Flush did I/O: %+v -> %+v", before, after)
	}
}

// offsets.json of older versions is converted to the journal on open.
func TestOffsetJournalConvertsJSON(t *testing.T) {
	dir := t.TempDir()
	doc, _ := json.Marshal(offsetsDoc{Version: 1, Consumers: map[string]map[string]uint64{
		"telemetry.>|up": {"0": 5, "3": 9}, "x": {"1": 2}}, Drained: []string{"x"}})
	if err := os.WriteFile(filepath.Join(dir, offsetsFile), doc, 0o640); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir)
	if off, _ := s.Get("telemetry.>|up", 3); off != 9 || !s.Drained("x") {
		t.Fatalf("converted state: %d drained %v", off, s.Drained("x"))
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, offsetsFile)); !os.IsNotExist(err) {
		t.Fatalf("offsets.json still there: %v", err)
	}
	s = openStore(t, dir)
	defer s.close()
	if off, _ := s.Get("telemetry.>|up", 0); off != 5 || !s.Drained("x") {
		t.Fatalf("after reopen: %d drained %v", off, s.Drained("x"))
	}
	// A bad JSON file names itself.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, offsetsFile), []byte("{"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := openOffsetStore(bad, time.Second); err == nil || !bytes.Contains([]byte(err.Error()), []byte(offsetsFile)) {
		t.Fatalf("bad offsets.json: %v", err)
	}
}
