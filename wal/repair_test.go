package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// writeFixture fills one partition with n records of device "dev" spread over
// several segments and returns the partition's directory.
func writeFixture(t *testing.T, dir string, n int) (Options, string) {
	t.Helper()
	o := testOptions()
	o.Partitions, o.HotPartitions = 1, 0
	l := openTest(t, dir, o)
	appendN(t, l, "dev", n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return o, partitionDir(dir, 0)
}

func lastSegment(t *testing.T, pdir string) segmentFile {
	t.Helper()
	segs, err := listSegments(pdir)
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	return segs[len(segs)-1]
}

// checkPrefix asserts the partition holds exactly records dev #0..want-1, intact.
func checkPrefix(t *testing.T, l *Log, want int) {
	t.Helper()
	es := readAll(t, l, 0)
	if len(es) != want {
		t.Fatalf("%d records after repair, want %d", len(es), want)
	}
	for i, e := range es {
		if e.Record.Seq != uint64(i+1) || !bytes.Equal(e.Record.Payload, payloadFor("dev", i)) {
			t.Fatalf("record %d: seq %d payload %q", i, e.Record.Seq, e.Record.Payload)
		}
	}
}

func TestTornTail(t *testing.T) {
	const n = 700 // two segments of 64 KiB
	base := t.TempDir()
	o, pdir := writeFixture(t, filepath.Join(base, "orig"), n)
	tail := lastSegment(t, pdir)
	data, _ := os.ReadFile(tail.path)
	// Every cut inside the last two records, plus a few bigger ones.
	cuts := []int{}
	for k := 1; k <= 80; k++ {
		cuts = append(cuts, k)
	}
	cuts = append(cuts, 200, len(data)/2, len(data))
	for _, cut := range cuts {
		dir := filepath.Join(base, fmt.Sprintf("cut%d", cut))
		copyDir(t, filepath.Join(base, "orig"), dir)
		p := filepath.Join(partitionDir(dir, 0), filepath.Base(tail.path))
		if err := os.Truncate(p, int64(len(data)-cut)); err != nil {
			t.Fatal(err)
		}
		// How many complete frames survive the cut.
		survivors, end := scanFrames(data[:len(data)-cut], 1<<62, nil)
		want := int(tail.first-1) + int(survivors)
		l := openTest(t, dir, o)
		checkPrefix(t, l, want)
		rep := l.Report().Partitions[0]
		if torn := int64(len(data) - cut - end); rep.TornBytes != torn {
			t.Fatalf("cut %d: report says %d torn bytes, want %d", cut, rep.TornBytes, torn)
		}
		// The log goes on: the next record continues the device's sequence.
		// Sequence numbers of lost records may be skipped, never reused.
		ps := appendN(t, l, "dev", 1)
		if ps[0].Seq <= uint64(want) || ps[0].Offset != uint64(want+1) {
			t.Fatalf("cut %d: append after repair got %+v, want offset %d and seq > %d", cut, ps[0], want+1, want)
		}
		l.Close()
	}
}

func TestGarbageTails(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	// Frames that tidwall accepts: length-prefixed junk.
	framed := []byte{}
	for i := 0; i < 20; i++ {
		framed = append(framed, 10)
		framed = append(framed, garbage[i*10:i*10+10]...)
	}
	cases := map[string][]byte{
		"zero-filled 4 bytes":   make([]byte, 4),
		"zero-filled 512 bytes": make([]byte, 512),
		"zero-filled 8 KiB":     make([]byte, 8192),
		"random bytes":          garbage,
		"framed junk":           framed,
		"0xff run":              bytes.Repeat([]byte{0xff}, 100),
	}
	for name, tailBytes := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o, pdir := writeFixture(t, dir, n)
			tail := lastSegment(t, pdir)
			f, err := os.OpenFile(tail.path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tailBytes)
			f.Close()
			l := openTest(t, dir, o)
			defer l.Close()
			checkPrefix(t, l, n)
			rep := l.Report().Partitions[0]
			if !rep.Repaired() {
				t.Fatalf("garbage tail not reported: %+v", rep)
			}
			ps := appendN(t, l, "dev", 1)
			if ps[0].Offset != n+1 || ps[0].Seq != n+1 {
				t.Fatalf("append after repair: %+v", ps[0])
			}
		})
	}
}

func TestFlippedByteInside(t *testing.T) {
	for _, where := range []string{"old segment", "tail segment"} {
		t.Run(where, func(t *testing.T) {
			const n = 700
			dir := t.TempDir()
			o, pdir := writeFixture(t, dir, n)
			segs, _ := listSegments(pdir)
			if len(segs) < 2 {
				t.Fatalf("fixture has %d segments, want several", len(segs))
			}
			seg := segs[0]
			victim := 100 // dev-100 lives in the first segment
			if where == "tail segment" {
				seg = segs[len(segs)-1]
				victim = int(seg.first) + 5 - 1
			}
			data, _ := os.ReadFile(seg.path)
			payload := payloadFor("dev", victim)
			at := bytes.Index(data, payload)
			if at < 0 {
				t.Fatalf("payload %q not found", payload)
			}
			data[at+len(payload)-1] ^= 0x01
			os.WriteFile(seg.path, data, 0o640)

			l := openTest(t, dir, o)
			defer l.Close()
			es := readAll(t, l, 0)
			if len(es) != n-1 {
				t.Fatalf("%d records, want %d (all but the damaged one)", len(es), n-1)
			}
			for _, e := range es {
				if e.Record.Seq == uint64(victim+1) {
					t.Fatalf("damaged record %d delivered: %q", victim, e.Record.Payload)
				}
			}
			if c := l.Stats().Partitions[0].Corrupt; c != 1 {
				t.Fatalf("corrupt counter %d, want 1", c)
			}
			rep, err := Check(dir, o, false)
			if err == nil && rep.Partitions[0].BadRecords != 1 {
				t.Fatalf("check: %+v", rep.Partitions[0])
			}
		})
	}
}

func TestCheckAndRepairCommand(t *testing.T) {
	dir := t.TempDir()
	o, pdir := writeFixture(t, dir, 200)
	tail := lastSegment(t, pdir)
	os.Truncate(tail.path, tail.size-3)
	rep, err := Check(dir, o, false)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Partitions[0]; p.Healthy() || p.TornBytes == 0 || p.Records != 199 {
		t.Fatalf("check before repair: %+v", p)
	}
	if after, _ := os.Stat(tail.path); after.Size() != tail.size-3 {
		t.Fatal("check without --repair changed the file")
	}
	rep, err = Check(dir, o, true)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.Partitions[0]; !rep.Repaired || !p.Healthy() || p.Records != 199 || p.Last != 199 {
		t.Fatalf("check after repair: %+v", rep)
	}
}

func TestLeftoverTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	o, pdir := writeFixture(t, dir, 10)
	junk := filepath.Join(pdir, "00000000000000000005.START.TEMP")
	os.WriteFile(junk, []byte("partial"), 0o640)
	l := openTest(t, dir, o)
	defer l.Close()
	if _, err := os.Stat(junk); !os.IsNotExist(err) {
		t.Fatalf("temp file still there: %v", err)
	}
	if l.Report().Partitions[0].TempFiles != 1 {
		t.Fatal("temp file not reported")
	}
	checkPrefix(t, l, 10)
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}
