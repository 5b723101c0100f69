package powerfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountT mounts a power-cut file system for a test; without /dev/fuse or
// root it skips (fails with CI=true).
func mountT(t *testing.T, opts Options) *FS {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("powerfs needs /dev/fuse and root, and CI=true")
		}
		t.Skip("powerfs needs /dev/fuse and root")
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	f, err := Mount(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// write creates or overwrites name with data at off, fsyncing the file when
// sync is set.
func write(t *testing.T, p string, data []byte, off int64, sync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	_, err = f.WriteAt(data, off)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

func syncDir(t *testing.T, p string) {
	t.Helper()
	d, err := os.Open(p)
	must(t, err)
	must(t, d.Sync())
	must(t, d.Close())
}

func fsyncFile(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
}

// want is what a path holds after the cut: nil data means absent.
type want struct {
	path string
	data []byte // nil: must not exist
	dir  bool
}

func TestCut(t *testing.T) {
	a1, a2 := []byte("first durable content\n"), []byte("second, never synced\n")
	cases := []struct {
		name string
		do   func(t *testing.T, m string)
		want []want
	}{
		{"write+fsync kept", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
		}, []want{{path: "a", data: a1}}},
		{"write without fsync dropped", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			write(t, m+"/a", a2, int64(len(a1)), false)
		}, []want{{path: "a", data: a1}}},
		{"overwrite without fsync dropped", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			write(t, m+"/a", []byte("XXXX"), 2, false)
		}, []want{{path: "a", data: a1}}},
		{"fdatasync keeps data", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, false)
			syncDir(t, m)
			f, err := os.OpenFile(m+"/a", os.O_WRONLY, 0)
			must(t, err)
			must(t, syscall.Fdatasync(int(f.Fd())))
			f.Close()
		}, []want{{path: "a", data: a1}}},
		{"create without dir fsync dropped", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
		}, []want{{path: "a"}}},
		{"create with dir fsync but no file fsync is empty", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, false)
			syncDir(t, m)
		}, []want{{path: "a", data: []byte{}}}},
		{"dir fsync before the write keeps the synced data", func(t *testing.T, m string) {
			write(t, m+"/a", nil, 0, false)
			syncDir(t, m)
			write(t, m+"/a", a1, 0, true)
		}, []want{{path: "a", data: a1}}},
		{"rename without dir fsync reverted", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Rename(m+"/a", m+"/b"))
		}, []want{{path: "a", data: a1}, {path: "b"}}},
		{"rename with dir fsync kept", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Rename(m+"/a", m+"/b"))
			syncDir(t, m)
		}, []want{{path: "a"}, {path: "b", data: a1}}},
		{"data synced after an unsynced rename lands under the old name", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Rename(m+"/a", m+"/b"))
			write(t, m+"/b", a2, 0, true)
		}, []want{{path: "a", data: append(append([]byte{}, a2...), a1[len(a2):]...)}, {path: "b"}}},
		{"atomic replace (tmp, fsync, rename, dir fsync) kept", func(t *testing.T, m string) {
			write(t, m+"/off", a1, 0, true)
			syncDir(t, m)
			write(t, m+"/off.tmp", a2, 0, true)
			must(t, os.Rename(m+"/off.tmp", m+"/off"))
			syncDir(t, m)
		}, []want{{path: "off", data: a2}, {path: "off.tmp"}}},
		{"replace without dir fsync keeps the old file", func(t *testing.T, m string) {
			write(t, m+"/off", a1, 0, true)
			syncDir(t, m)
			write(t, m+"/off.tmp", a2, 0, true)
			must(t, os.Rename(m+"/off.tmp", m+"/off"))
		}, []want{{path: "off", data: a1}, {path: "off.tmp"}}},
		{"unlink without dir fsync reverted", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Remove(m+"/a"))
		}, []want{{path: "a", data: a1}}},
		{"unlink with dir fsync kept", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Remove(m+"/a"))
			syncDir(t, m)
		}, []want{{path: "a"}}},
		{"truncate without fsync reverted", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Truncate(m+"/a", 3))
		}, []want{{path: "a", data: a1}}},
		{"truncate with fsync kept", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Truncate(m+"/a", 3))
			fsyncFile(t, m+"/a")
		}, []want{{path: "a", data: a1[:3]}}},
		{"truncate down and up again reads zeros", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Truncate(m+"/a", 3))
			must(t, os.Truncate(m+"/a", int64(len(a1))))
			fsyncFile(t, m+"/a")
		}, []want{{path: "a", data: append(append([]byte{}, a1[:3]...), make([]byte, len(a1)-3)...)}}},
		{"mkdir without parent fsync dropped", func(t *testing.T, m string) {
			must(t, os.Mkdir(m+"/d", 0o755))
			write(t, m+"/d/a", a1, 0, true)
			syncDir(t, m+"/d")
		}, []want{{path: "d"}, {path: "d/a"}}},
		{"mkdir with parent fsync, file without dir fsync", func(t *testing.T, m string) {
			must(t, os.Mkdir(m+"/d", 0o755))
			syncDir(t, m)
			write(t, m+"/d/a", a1, 0, true)
		}, []want{{path: "d", dir: true}, {path: "d/a"}}},
		{"nested tree synced bottom-up kept", func(t *testing.T, m string) {
			must(t, os.MkdirAll(m+"/d/e", 0o755))
			write(t, m+"/d/e/a", a1, 0, true)
			syncDir(t, m+"/d/e")
			syncDir(t, m+"/d")
			syncDir(t, m)
		}, []want{{path: "d/e", dir: true}, {path: "d/e/a", data: a1}}},
		{"hard link without dir fsync dropped, original kept", func(t *testing.T, m string) {
			write(t, m+"/a", a1, 0, true)
			syncDir(t, m)
			must(t, os.Link(m+"/a", m+"/b"))
		}, []want{{path: "a", data: a1}, {path: "b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mountT(t, Options{})
			m := f.Path()
			c.do(t, m)
			must(t, f.Cut())
			for _, w := range c.want {
				p := filepath.Join(m, w.path)
				fi, err := os.Stat(p)
				switch {
				case w.data == nil && !w.dir:
					if err == nil {
						t.Errorf("%s exists after the cut (size %d), want absent", w.path, fi.Size())
					} else if !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s: %v", w.path, err)
					}
				case w.dir:
					if err != nil || !fi.IsDir() {
						t.Errorf("%s: want a directory, got %v %v", w.path, fi, err)
					}
				default:
					got, err := os.ReadFile(p)
					if err != nil {
						t.Errorf("%s: %v", w.path, err)
					} else if !bytes.Equal(got, w.data) {
						t.Errorf("%s = %q, want %q", w.path, got, w.data)
					}
				}
			}
		})
	}
}

// The mount shows pending state; the backing directory only durable data.
func TestPendingVisibleNotDurable(t *testing.T) {
	f := mountT(t, Options{})
	m := f.Path()
	write(t, m+"/a", []byte("synced"), 0, true)
	syncDir(t, m)
	write(t, m+"/a", []byte("-pending"), 6, false)
	got, err := os.ReadFile(m + "/a")
	must(t, err)
	if string(got) != "synced-pending" {
		t.Fatalf("mount shows %q, want the pending state", got)
	}
	var durable []string
	ents, err := os.ReadDir(f.DurableDir())
	must(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(f.DurableDir(), e.Name()))
		must(t, err)
		durable = append(durable, string(b))
	}
	if len(durable) != 1 || durable[0] != "synced" {
		t.Fatalf("durable dir holds %q, want only the synced data", durable)
	}
	if s := f.Stats(); s.PendingBytes != int64(len("-pending")) {
		t.Fatalf("PendingBytes = %d, want %d", s.PendingBytes, len("-pending"))
	}
}

// A torn write keeps a sector-aligned prefix of the newest unsynced write.
func TestTornWrite(t *testing.T) {
	data := make([]byte, 8*SectorSize)
	for i := range data {
		data[i] = byte(i%251) + 1
	}
	lens := map[int64]bool{}
	for seed := uint64(1); seed <= 8; seed++ {
		f := mountT(t, Options{Tear: true, Seed: seed})
		m := f.Path()
		write(t, m+"/seg", data[:100], 0, true)
		syncDir(t, m)
		// Unsynced: an append that starts mid-sector, ending 7 sectors on.
		write(t, m+"/seg", data[100:], 100, false)
		must(t, f.Cut())
		got, err := os.ReadFile(m + "/seg")
		must(t, err)
		n := int64(len(got))
		if n%SectorSize != 0 || n < SectorSize || n >= int64(len(data)) {
			t.Fatalf("seed %d: torn file is %d bytes, want a 512-byte boundary strictly inside the write", seed, n)
		}
		if !bytes.Equal(got, data[:n]) {
			t.Fatalf("seed %d: torn content is not a prefix of what was written", seed)
		}
		if s := f.Stats(); s.Torn != 1 {
			t.Fatalf("seed %d: Torn = %d", seed, s.Torn)
		}
		lens[n] = true
		f.Close()
	}
	if len(lens) < 2 {
		t.Fatalf("tearing always kept the same length: %v", lens)
	}
}

// After a cut the old mount's open files refuse changes (EIO).
func TestCutKillsOpenFiles(t *testing.T) {
	f := mountT(t, Options{})
	m := f.Path()
	h, err := os.OpenFile(m+"/a", os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	defer h.Close()
	must(t, f.Cut())
	if _, err := h.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write on a file opened before the cut: %v, want EIO", err)
	}
	if err := h.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync on a file opened before the cut: %v, want EIO", err)
	}
	// The new mount works.
	write(t, m+"/b", []byte("ok"), 0, true)
}

func TestFaults(t *testing.T) {
	cases := []struct {
		fault Fault
		op    string
		do    func(m string) error
		want  syscall.Errno // 0: succeeds
	}{
		{FaultEIO, "write", func(m string) error { return writeErr(m+"/a", false) }, syscall.EIO},
		{FaultEIO, "fsync", func(m string) error { return syncErr(m + "/a") }, syscall.EIO},
		{FaultEIO, "create", func(m string) error { return writeErr(m+"/new", false) }, syscall.EIO},
		{FaultEIO, "read", func(m string) error { _, err := os.ReadFile(m + "/a"); return err }, 0},
		{FaultEROFS, "write", func(m string) error { return writeErr(m+"/a", false) }, syscall.EROFS},
		{FaultEROFS, "create", func(m string) error { return writeErr(m+"/new", false) }, syscall.EROFS},
		{FaultEROFS, "unlink", func(m string) error { return os.Remove(m + "/a") }, syscall.EROFS},
		{FaultEROFS, "mkdir", func(m string) error { return os.Mkdir(m+"/d", 0o755) }, syscall.EROFS},
		{FaultEROFS, "read", func(m string) error { _, err := os.ReadFile(m + "/a"); return err }, 0},
		{FaultENOSPC, "write", func(m string) error { return writeErr(m+"/a", false) }, syscall.ENOSPC},
		{FaultENOSPC, "create", func(m string) error { return writeErr(m+"/new", false) }, syscall.ENOSPC},
		{FaultENOSPC, "unlink", func(m string) error { return os.Remove(m + "/a") }, 0},
		{FaultENOSPC, "fsync", func(m string) error { return syncErr(m + "/a") }, 0},
	}
	for _, c := range cases {
		t.Run(c.fault.String()+"/"+c.op, func(t *testing.T) {
			f := mountT(t, Options{})
			m := f.Path()
			write(t, m+"/a", []byte("durable"), 0, true)
			syncDir(t, m)
			f.SetFault(c.fault)
			err := c.do(m)
			if c.want == 0 && err != nil {
				t.Fatalf("%v under %v: %v, want success", c.op, c.fault, err)
			}
			if c.want != 0 && !errors.Is(err, c.want) {
				t.Fatalf("%v under %v: %v, want %v", c.op, c.fault, err, c.want)
			}
			f.SetFault(FaultNone)
			must(t, writeErr(m+"/a", true))
			must(t, f.Cut())
			got, err := os.ReadFile(m + "/a")
			must(t, err)
			if !bytes.HasPrefix(got, []byte("durable")) && !bytes.HasPrefix(got, []byte("again")) {
				t.Fatalf("after the fault cleared: %q", got)
			}
		})
	}
}

func writeErr(p string, sync bool) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("again"), 0); err != nil {
		return err
	}
	if sync {
		return f.Sync()
	}
	return nil
}

func syncErr(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Capacity makes Statfs report a small disk and writes past it fail.
func TestCapacity(t *testing.T) {
	f := mountT(t, Options{Capacity: 1 << 20})
	m := f.Path()
	var st syscall.Statfs_t
	must(t, syscall.Statfs(m, &st))
	if total := int64(st.Blocks) * st.Bsize; total != 1<<20 {
		t.Fatalf("Statfs total %d, want 1 MiB", total)
	}
	write(t, m+"/a", make([]byte, 512<<10), 0, true)
	must(t, syscall.Statfs(m, &st))
	if free := int64(st.Bavail) * st.Bsize; free != 512<<10 {
		t.Fatalf("Statfs free %d, want 512 KiB", free)
	}
	h, err := os.OpenFile(m+"/b", os.O_CREATE|os.O_WRONLY, 0o644)
	must(t, err)
	defer h.Close()
	if _, err := h.Write(make([]byte, 600<<10)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: %v, want ENOSPC", err)
	}
	must(t, os.Remove(m+"/a"))
	if _, err := h.WriteAt(make([]byte, 600<<10), 0); err != nil {
		t.Fatalf("write after freeing space: %v", err)
	}
}

// Files created and removed over and over do not grow the model.
func TestModelBounded(t *testing.T) {
	f := mountT(t, Options{})
	m := f.Path()
	for i := range 300 {
		p := fmt.Sprintf("%s/%020d", m, i)
		write(t, p, []byte("segment"), 0, true)
		syncDir(t, m)
		if i >= 3 {
			must(t, os.Remove(fmt.Sprintf("%s/%020d", m, i-3)))
			syncDir(t, m)
		}
	}
	if s := f.Stats(); s.Files > 10 {
		t.Fatalf("model tracks %d inodes for 3 live files", s.Files)
	}
	must(t, f.Cut())
	ents, err := os.ReadDir(m)
	must(t, err)
	if len(ents) != 3 {
		t.Fatalf("after the cut %d files, want 3", len(ents))
	}
	ents, err = os.ReadDir(f.DurableDir())
	must(t, err)
	if len(ents) != 3 {
		t.Fatalf("durable dir holds %d files, want 3", len(ents))
	}
}

// FreezeOn cuts the power right after a chosen change: later changes fail
// and only what was durable at that moment survives.
func TestFreezeOn(t *testing.T) {
	f := mountT(t, Options{})
	m := f.Path()
	write(t, m+"/off", []byte("old"), 0, true)
	syncDir(t, m)
	frozen := f.FreezeOn(func(e Event) bool { return e.Op == OpRename && e.To == "off" })
	write(t, m+"/off.tmp", []byte("new"), 0, true)
	select {
	case <-frozen:
		t.Fatal("froze before the rename")
	default:
	}
	must(t, os.Rename(m+"/off.tmp", m+"/off"))
	<-frozen
	d, err := os.Open(m)
	must(t, err)
	if err := d.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("dir fsync after the freeze: %v, want EIO", err)
	}
	d.Close()
	if got, _ := os.ReadFile(m + "/off"); string(got) != "new" {
		t.Fatalf("before the cut the mount shows %q, want the pending rename", got)
	}
	must(t, f.Cut())
	if got, _ := os.ReadFile(m + "/off"); string(got) != "old" {
		t.Fatalf("after the cut off = %q, want old", got)
	}
	if _, err := os.Stat(m + "/off.tmp"); err == nil {
		t.Fatal("off.tmp survived the cut without a dir fsync")
	}
	// A trigger on fsync fires after the data is durable.
	frozen = f.FreezeOn(func(e Event) bool { return e.Op == OpFsync && e.Path == "off" })
	write(t, m+"/off", []byte("NEW"), 0, true)
	<-frozen
	must(t, f.Cut())
	if got, _ := os.ReadFile(m + "/off"); string(got) != "NEW" {
		t.Fatalf("after a cut right after fsync off = %q, want NEW", got)
	}
}

// Events name the file a change touched, also for files written through the
// handle their create returned.
func TestEventPaths(t *testing.T) {
	f := mountT(t, Options{})
	m := f.Path()
	must(t, os.MkdirAll(m+"/d/e", 0o755))
	var got []Event
	done := f.FreezeOn(func(e Event) bool { got = append(got, e); return e.Op == OpFsyncDir })
	h, err := os.Create(m + "/d/e/seg")
	must(t, err)
	_, err = h.Write([]byte("x"))
	must(t, err)
	must(t, h.Sync())
	h.Close()
	must(t, os.Rename(m+"/d/e/seg", m+"/d/seg2"))
	syncDir(t, m+"/d")
	<-done
	want := []Event{{Op: OpCreate, Path: "d/e/seg"}, {Op: OpWrite, Path: "d/e/seg"}, {Op: OpFsync, Path: "d/e/seg"},
		{Op: OpRename, Path: "d/e/seg", To: "d/seg2"}, {Op: OpFsyncDir, Path: "d"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
