package wal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// requireRoot skips (or fails under CI=true) a test that needs root.
func requireRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s needs root, and CI=true", what)
		}
		t.Skipf("%s needs root", what)
	}
}

// mountTmpfs mounts a size-limited tmpfs at a new directory for the test.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	requireRoot(t, "mounting a small tmpfs")
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func TestDiskFull(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	o := testOptions()
	o.Partitions, o.HotPartitions = 1, 0
	o.MaxBytes = 0     // no budget: the disk itself runs full
	o.MinFreeBytes = 0 // and no watermark before it
	// Leave room for the filler: it is freed later to bring space back.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 256<<10), 0o640); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, filepath.Join(dir, "data"), o)
	var acked []Position
	var fullErr error
	for i := 0; i < 100000; i++ {
		pos, err := l.Append(context.Background(), &Record{Device: "dev", Payload: payloadFor("dev", i)})
		if err != nil {
			fullErr = err
			break
		}
		acked = append(acked, pos)
	}
	if !errors.Is(fullErr, syscall.ENOSPC) {
		t.Fatalf("filling the disk ended with %v, want ENOSPC", fullErr)
	}
	if len(acked) < 100 {
		t.Fatalf("only %d appends before ENOSPC", len(acked))
	}
	// Appends keep failing cleanly while the disk is full, without a crash.
	for i := 0; i < 3; i++ {
		if _, err := l.Append(context.Background(), &Record{Device: "dev", Payload: payloadFor("dev", 1)}); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v", err)
		}
	}
	if s := l.Stats().Partitions[0]; s.WriteErrors == 0 || s.Repairs == 0 {
		t.Fatalf("write errors not counted: %+v", s)
	}
	// Nothing durable was lost, and the log is readable.
	es := readAll(t, l, 0)
	if len(es) != len(acked) {
		t.Fatalf("%d records readable, %d acknowledged", len(es), len(acked))
	}
	// Space returns: appends succeed again, the sequence goes on.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	pos, err := l.Append(context.Background(), &Record{Device: "dev", Payload: []byte("after")})
	if err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
	if pos.Offset != uint64(len(acked)+1) || pos.Seq <= acked[len(acked)-1].Seq {
		t.Fatalf("append after space returned at %+v, last acked %+v", pos, acked[len(acked)-1])
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	l = openTest(t, filepath.Join(dir, "data"), o)
	defer l.Close()
	if es := readAll(t, l, 0); len(es) != len(acked)+1 || string(es[len(es)-1].Record.Payload) != "after" {
		t.Fatalf("after reopen: %d records", len(es))
	}
}

// The free-space watermark refuses appends (reject) before the file system is
// full, and lets them in again once retention freed committed segments.
func TestDiskWatermark(t *testing.T) {
	dir := mountTmpfs(t, "4m")
	o := testOptions()
	o.Partitions, o.HotPartitions = 1, 0
	o.MaxBytes = 0
	o.MinFreeBytes = 2 << 20
	o.FullPolicy = Reject
	l := openTest(t, filepath.Join(dir, "data"), o)
	defer l.Close()
	if err := l.Offsets().Commit("c", 0, 0); err != nil {
		t.Fatal(err)
	}
	var lowErr error
	var last Position
	for i := 0; i < 100000 && lowErr == nil; i++ {
		pos, err := l.Append(context.Background(), &Record{Device: "dev", Payload: make([]byte, 1000)})
		if err != nil {
			lowErr = err
			break
		}
		last = pos
		if i%50 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !errors.Is(lowErr, ErrDiskLow) {
		t.Fatalf("filling the disk ended with %v, want ErrDiskLow", lowErr)
	}
	if l.Health() == nil || !l.Stats().DiskLow || l.Stats().Rejected["disk_low"] == 0 {
		t.Fatalf("below the watermark: health %v, stats %+v", l.Health(), l.Stats())
	}
	// The consumer finishes everything: retention frees its segments.
	if err := l.Offsets().Commit("c", 0, last.Offset); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if err := l.Health(); err != nil {
		t.Fatalf("after retention freed space: %v", err)
	}
	if _, err := l.Append(context.Background(), &Record{Device: "dev", Payload: []byte("after")}); err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
}

// Space the commit journal's checkpoint frees does not lift a refusal: the
// journal fills it again, so it counts as used, and appends resume only
// once the free space is back above the watermark by resumeMargin.
func TestDiskWatermarkJournalCheckpoint(t *testing.T) {
	dir := mountTmpfs(t, "8m")
	o := testOptions()
	o.Durability = DurabilityInterval // rounds go through the commit journal
	o.Partitions, o.HotPartitions = 1, 0
	o.MaxBytes = 0
	o.MinFreeBytes = 4 << 20
	o.FullPolicy = Reject
	// A filler brings the refusal before the journal's first checkpoint, so
	// that the journal holds much more than resumeMargin when it comes.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 5<<19), 0o640); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, filepath.Join(dir, "data"), o)
	defer l.Close()
	if err := l.Offsets().Commit("c", 0, 0); err != nil {
		t.Fatal(err)
	}
	// Sixteen publishers at once: rounds carry many records.
	var (
		mu     sync.Mutex
		lowErr error
		last   Position
		wg     sync.WaitGroup
	)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				pos, err := l.Append(context.Background(), &Record{Device: fmt.Sprintf("dev-%d", g), Payload: make([]byte, 1000)})
				mu.Lock()
				if err != nil || lowErr != nil {
					if lowErr == nil {
						lowErr = err
					}
					mu.Unlock()
					return
				}
				last.Offset = max(last.Offset, pos.Offset)
				mu.Unlock()
				if i%50 == 0 {
					if _, err := l.EnforceRetention(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if !errors.Is(lowErr, ErrDiskLow) {
		t.Fatalf("filling the disk ended with %v, want ErrDiskLow", lowErr)
	}
	held := l.journal.onDisk.Load()
	if held <= resumeMargin(o.MinFreeBytes) {
		t.Fatal("the commit journal holds nothing at the refusal: the test cannot see a checkpoint")
	}
	// A checkpoint now (nothing is unsynced: the committer is idle) frees
	// what the journal held.
	t.Logf("journal holds %d bytes at the refusal; free %d", held, l.disk.free.Load())
	if err := l.journal.reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if err := l.Health(); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("after a checkpoint freed %d journal bytes: health %v, want still below the watermark (free %d, want %d)",
			held, err, l.disk.free.Load(), l.disk.want.Load())
	}
	// The consumer finishes everything and the filler goes: retention
	// frees the segments, the space is back.
	if err := l.Offsets().Commit("c", 0, last.Offset); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if err := l.Health(); err != nil {
		t.Fatalf("after retention freed space: %v", err)
	}
	if free, want := l.disk.free.Load()-l.journalHeadroom(), l.disk.want.Load(); free < want+resumeMargin(want) {
		t.Fatalf("resumed with %d bytes free for data, want at least %d", free, want+resumeMargin(want))
	}
}

func TestResumeMargin(t *testing.T) {
	for _, c := range []struct{ want, margin int64 }{
		{1 << 20, 256 << 10}, {4 << 20, 512 << 10}, {32 << 20, 4 << 20}, {1 << 30, 8 << 20},
	} {
		if got := resumeMargin(c.want); got != c.margin {
			t.Errorf("resumeMargin(%d) = %d, want %d", c.want, got, c.margin)
		}
	}
}
