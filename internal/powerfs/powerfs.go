// Package powerfs is a FUSE file system for tests that behaves like a disk
// losing power, in the style of Jepsen's LazyFS. It is a pass-through mount
// over a scratch directory (what the mount shows) that also keeps a model of
// what is durable: a file's data and size become durable at fsync/fdatasync
// of that file, a directory's entries (create, rename, unlink, mkdir, link)
// at fsync of that directory, as POSIX promises and no more. Cut() drops
// everything else, optionally tearing each file's newest unsynced write at a
// 512-byte sector boundary, and remounts: the mount then shows only what was
// durable. Fault switches make writes and syncs fail with EIO, EROFS or
// ENOSPC.
//
// Memory is bounded by the number of live files: visible data lives in the
// scratch directory, durable data in the backing directory (one file per
// inode), and per file only a bounded set of dirty ranges and a copy of the
// newest unsynced write (at most one FUSE write, 128 KiB) are held.
package powerfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Fault is a disk failure the mount simulates until cleared.
type Fault int

const (
	// FaultNone: the disk works.
	FaultNone Fault = iota
	// FaultEIO: writes, syncs and namespace changes fail with EIO (a dying
	// SD card); reads still work.
	FaultEIO
	// FaultEROFS: every change fails with EROFS (the kernel remounted the
	// card read-only).
	FaultEROFS
	// FaultENOSPC: writes, creates and allocations fail with ENOSPC;
	// removals, renames, truncates and syncs still work.
	FaultENOSPC
)

func (f Fault) String() string {
	switch f {
	case FaultEIO:
		return "EIO"
	case FaultEROFS:
		return "EROFS"
	case FaultENOSPC:
		return "ENOSPC"
	}
	return "none"
}

// SectorSize is the unit a torn write keeps.
const SectorSize = 512

// maxRanges bounds a file's dirty-range list; beyond it the ranges merge into
// one span (copying unchanged bytes at fsync is harmless).
const maxRanges = 64

// Options configure a mount.
type Options struct {
	// Dir holds the scratch (visible) and backing (durable) directories and
	// the mount point: Dir/visible, Dir/durable, Dir/mnt. Required.
	Dir string
	// Tear keeps, at Cut, a random sector-aligned prefix of each file's
	// newest unsynced write, as a disk that lost power mid-write does.
	Tear bool
	// Seed for the tearing choices (0: random).
	Seed uint64
	// Capacity, when > 0, is the size Statfs reports, with the visible
	// bytes as used; writes that would exceed it fail with ENOSPC.
	Capacity int64
}

// Stats count what the mount did.
type Stats struct {
	Writes, Fsyncs, DirSyncs, Cuts int
	// Torn is the number of writes a Cut kept partly.
	Torn int
	// DroppedBytes is the unsynced data the Cuts discarded (before tearing).
	DroppedBytes int64
	// PendingBytes is the unsynced data now.
	PendingBytes int64
	// Files is the number of inodes the model tracks.
	Files int
}

// FS is one power-cut mount.
type FS struct {
	opts    Options
	visible string
	durable string
	mnt     string

	mu      sync.Mutex
	gen     *generation
	server  *fuse.Server
	byIno   map[uint64]*inode // visible inode number → model (this generation)
	byID    map[uint64]*inode
	dirs    map[uint64]map[string]uint64 // durable entries: dir id → name → id
	nextID  uint64
	fault   Fault
	rng     *rand.Rand
	stats   Stats
	closed  bool
	visUsed int64 // visible bytes, for Capacity (recomputed at Statfs)
	trigger func(Event) bool
	frozen  chan struct{} // closed when the armed trigger fired
}

// Op names a change the mount sees.
type Op string

const (
	OpWrite    Op = "write"
	OpTruncate Op = "truncate"
	OpFsync    Op = "fsync" // fsync or fdatasync of a file
	OpFsyncDir Op = "fsyncdir"
	OpCreate   Op = "create" // a new file, directory, link or node
	OpRename   Op = "rename"
	OpUnlink   Op = "unlink" // unlink or rmdir
)

// Event is one applied change; paths are relative to the mount point.
type Event struct {
	Op   Op
	Path string
	To   string // rename target
}

// FreezeOn arms a one-shot trigger: right after the first change match
// accepts has been applied, the disk loses power (as Freeze). The returned
// channel is closed then. It replaces an armed trigger.
func (f *FS) FreezeOn(match func(Event) bool) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trigger = match
	f.frozen = make(chan struct{})
	if f.gen.dead {
		close(f.frozen)
		f.trigger = nil
	}
	return f.frozen
}

// Freeze cuts the power now: every later change fails with EIO and nothing
// more becomes durable. The mount still shows the pending state until Cut.
func (f *FS) Freeze() {
	f.mu.Lock()
	f.freezeLocked()
	f.mu.Unlock()
}

func (f *FS) freezeLocked() {
	f.gen.dead = true
	if f.trigger != nil {
		f.trigger = nil
		close(f.frozen)
	}
}

// eventLocked runs the armed trigger on a change of generation gen.
func (f *FS) eventLocked(gen *generation, ev func() Event) {
	if f.trigger == nil || gen != f.gen {
		return
	}
	if f.trigger(ev()) {
		f.freezeLocked()
	}
}

// generation is one mount between cuts; after a cut its nodes refuse every
// change, as a machine without power does.
type generation struct{ dead bool }

// inode is the model of one file or directory.
type inode struct {
	id    uint64
	dir   bool
	mode  uint32
	open  int        // open handles (kept alive while open)
	dirty [][2]int64 // [start, end) written since the last fsync
	// newest unsynced write (for tearing)
	newestOff int64
	newest    []byte
}

// Mount creates Dir's subdirectories and mounts the file system on Dir/mnt.
func Mount(opts Options) (*FS, error) {
	if opts.Dir == "" {
		return nil, errors.New("powerfs: Options.Dir is required")
	}
	f := &FS{
		opts:    opts,
		visible: filepath.Join(opts.Dir, "visible"),
		durable: filepath.Join(opts.Dir, "durable"),
		mnt:     filepath.Join(opts.Dir, "mnt"),
		byIno:   map[uint64]*inode{},
		byID:    map[uint64]*inode{},
		dirs:    map[uint64]map[string]uint64{},
	}
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	f.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, d := range []string{f.visible, f.durable, f.mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("powerfs: %w", err)
		}
	}
	root := &inode{id: 1, dir: true, mode: syscall.S_IFDIR | 0o755}
	f.nextID = 2
	f.byID[1] = root
	f.dirs[1] = map[string]uint64{}
	f.mu.Lock()
	err := f.rebuildLocked()
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the mount point.
func (f *FS) Path() string { return f.mnt }

// DurableDir is the backing directory (one file per durable inode).
func (f *FS) DurableDir() string { return f.durable }

// SetFault switches a simulated disk failure on (or off with FaultNone).
func (f *FS) SetFault(x Fault) {
	f.mu.Lock()
	f.fault = x
	f.mu.Unlock()
}

// Stats returns the counters.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Files = len(f.byID)
	for _, in := range f.byID {
		s.PendingBytes += rangesLen(in.dirty)
	}
	return s
}

func (f *FS) mount() error {
	gen := &generation{}
	root := &fs.LoopbackRoot{Path: f.visible}
	var st syscall.Stat_t
	if err := syscall.Stat(f.visible, &st); err != nil {
		return fmt.Errorf("powerfs: %w", err)
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *fs.LoopbackRoot, parent *fs.Inode, name string, st *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: f, gen: gen}
	}
	rootNode := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, fs: f, gen: gen}
	root.RootNode = rootNode
	zero := time.Duration(0)
	srv, err := fs.Mount(f.mnt, rootNode, &fs.Options{
		MountOptions: fuse.MountOptions{FsName: "powerfs", Name: "powerfs", DirectMount: true, MaxWrite: 128 << 10},
		// Every lookup and attribute goes to the server: after a cut the
		// kernel must not remember what was lost.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s: %w", f.mnt, err)
	}
	f.mu.Lock()
	f.gen, f.server = gen, srv
	f.mu.Unlock()
	return nil
}

// Cut loses power: from now on the old mount refuses every change, all state
// that was not durable is dropped (each file's newest unsynced write torn if
// Options.Tear), and the file system is mounted again showing only durable
// state. Processes still using the old mount get EIO on changes; kill them.
func (f *FS) Cut() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errors.New("powerfs: closed")
	}
	f.freezeLocked()
	f.stats.Cuts++
	var errs []error
	for _, in := range f.byID {
		f.stats.DroppedBytes += rangesLen(in.dirty)
		if f.opts.Tear && len(in.newest) > 0 && !in.dir {
			if err := f.tearLocked(in); err != nil {
				errs = append(errs, err)
			}
		}
	}
	srv := f.server
	f.mu.Unlock()
	// Lazy: a process that still holds files open keeps the old, dead mount.
	if err := syscall.Unmount(f.mnt, syscall.MNT_DETACH); err != nil {
		errs = append(errs, fmt.Errorf("powerfs: unmount: %w", err))
	}
	go srv.Wait()
	f.mu.Lock()
	err := f.rebuildLocked()
	f.mu.Unlock()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := f.mount(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close unmounts. The directories stay for inspection (t.TempDir removes them).
func (f *FS) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.gen.dead = true
	srv := f.server
	f.mu.Unlock()
	err := srv.Unmount()
	if err != nil {
		err = syscall.Unmount(f.mnt, syscall.MNT_DETACH)
	}
	return err
}

// tearLocked writes a random sector-aligned prefix of in's newest unsynced
// write to its durable content.
func (f *FS) tearLocked(in *inode) error {
	off, data := in.newestOff, in.newest
	first := (off/SectorSize + 1) * SectorSize // first boundary after off
	end := off + int64(len(data))
	if first >= end {
		return nil // within one sector: written whole or not at all
	}
	n := (end - 1 - first) / SectorSize // boundaries strictly inside are first + k*512, k in [0, n]
	cut := first + f.rng.Int64N(n+1)*SectorSize
	df, err := os.OpenFile(f.durablePath(in.id), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("powerfs: tear: %w", err)
	}
	defer df.Close()
	if _, err := df.WriteAt(data[:cut-off], off); err != nil {
		return fmt.Errorf("powerfs: tear: %w", err)
	}
	f.stats.Torn++
	return nil
}

func (f *FS) durablePath(id uint64) string {
	return filepath.Join(f.durable, strconv.FormatUint(id, 10))
}

// rebuildLocked makes the visible directory equal to the durable state and
// forgets everything pending.
func (f *FS) rebuildLocked() error {
	ents, err := os.ReadDir(f.visible)
	if err != nil {
		return fmt.Errorf("powerfs: rebuild: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(f.visible, e.Name())); err != nil {
			return fmt.Errorf("powerfs: rebuild: %w", err)
		}
	}
	f.byIno = map[uint64]*inode{}
	reached := map[uint64]bool{1: true}
	first := map[uint64]string{} // file id → its first visible path (hard links)
	var rootSt syscall.Stat_t
	if err := syscall.Stat(f.visible, &rootSt); err != nil {
		return fmt.Errorf("powerfs: rebuild: %w", err)
	}
	f.byIno[rootSt.Ino] = f.byID[1]
	var walk func(dir uint64, path string) error
	walk = func(dir uint64, path string) error {
		names := make([]string, 0, len(f.dirs[dir]))
		for name := range f.dirs[dir] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			id := f.dirs[dir][name]
			in := f.byID[id]
			if in == nil {
				continue
			}
			p := filepath.Join(path, name)
			if in.dir {
				if reached[id] {
					continue // a directory durable in two places: keep the first
				}
				reached[id] = true
				if err := os.Mkdir(p, os.FileMode(in.mode&0o7777)); err != nil {
					return err
				}
				if err := f.mapPath(p, in); err != nil {
					return err
				}
				if err := walk(id, p); err != nil {
					return err
				}
				continue
			}
			reached[id] = true
			if q, ok := first[id]; ok {
				if err := os.Link(q, p); err != nil {
					return err
				}
				continue
			}
			first[id] = p
			if err := copyFile(f.durablePath(id), p, os.FileMode(in.mode&0o7777)); err != nil {
				return err
			}
			if err := f.mapPath(p, in); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(1, f.visible); err != nil {
		return fmt.Errorf("powerfs: rebuild: %w", err)
	}
	for id, in := range f.byID {
		in.dirty, in.newest, in.open = nil, nil, 0
		if !reached[id] {
			f.forgetLocked(id)
		}
	}
	return nil
}

func (f *FS) mapPath(p string, in *inode) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return err
	}
	f.byIno[st.Ino] = in
	return nil
}

func (f *FS) forgetLocked(id uint64) {
	delete(f.byID, id)
	delete(f.dirs, id)
	_ = os.Remove(f.durablePath(id))
}

// gcLocked forgets inodes no durable name, visible name or open handle
// reaches, so a week of segment files created and deleted stays bounded.
func (f *FS) gcLocked() {
	keep := map[uint64]bool{}
	for _, in := range f.byIno {
		keep[in.id] = true
	}
	var mark func(id uint64)
	mark = func(id uint64) {
		for _, c := range f.dirs[id] {
			if !keep[c] {
				keep[c] = true
				mark(c)
			} else if in := f.byID[c]; in != nil && in.dir {
				continue
			}
		}
	}
	keep[1] = true
	mark(1)
	// Directories reached only through the visible tree keep their entries.
	for id, in := range f.byID {
		if in.dir && keep[id] {
			mark(id)
		}
	}
	for id, in := range f.byID {
		if !keep[id] && in.open == 0 {
			f.forgetLocked(id)
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return out.Close() // created, never synced: empty
	} else if err != nil {
		out.Close()
		return err
	}
	defer in.Close()
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// inodeLocked returns the model for a visible inode number, creating it.
func (f *FS) inodeLocked(ino uint64, mode uint32) *inode {
	if in := f.byIno[ino]; in != nil {
		return in
	}
	in := &inode{id: f.nextID, dir: mode&syscall.S_IFMT == syscall.S_IFDIR, mode: mode}
	f.nextID++
	f.byIno[ino] = in
	f.byID[in.id] = in
	return in
}

func (f *FS) inodeOfPathLocked(p string) (*inode, *syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return nil, nil, err
	}
	return f.inodeLocked(st.Ino, st.Mode), &st, nil
}

// unlinkedLocked drops the visible-inode mapping of a name about to go away
// when it is the inode's last link (its number may be reused).
func (f *FS) unlinkedLocked(st *syscall.Stat_t) {
	if st != nil && (st.Nlink <= 1 || st.Mode&syscall.S_IFMT == syscall.S_IFDIR) {
		delete(f.byIno, st.Ino)
	}
}

// changeErr is the errno for a change of kind k under the current fault, or
// 0. The caller holds f.mu.
type change int

const (
	chWrite  change = iota // data written or space allocated
	chCreate               // a new name
	chRemove               // a name removed, renamed, or data truncated
	chSync
)

func (f *FS) faultLocked(gen *generation, k change) syscall.Errno {
	if gen.dead || f.closed {
		return syscall.EIO
	}
	switch f.fault {
	case FaultEIO:
		return syscall.EIO
	case FaultEROFS:
		return syscall.EROFS
	case FaultENOSPC:
		if k == chWrite || k == chCreate {
			return syscall.ENOSPC
		}
	}
	return 0
}

// addRange records [a, b) as written since the last fsync.
func addRange(rs [][2]int64, a, b int64) [][2]int64 {
	if a >= b {
		return rs
	}
	i := sort.Search(len(rs), func(i int) bool { return rs[i][1] >= a })
	j := i
	for j < len(rs) && rs[j][0] <= b {
		a = min(a, rs[j][0])
		b = max(b, rs[j][1])
		j++
	}
	if i == j {
		rs = append(rs, [2]int64{})
		copy(rs[i+1:], rs[i:])
		rs[i] = [2]int64{a, b}
	} else {
		rs[i] = [2]int64{a, b}
		rs = append(rs[:i+1], rs[j:]...)
	}
	if len(rs) > maxRanges {
		rs = [][2]int64{{rs[0][0], rs[len(rs)-1][1]}}
	}
	return rs
}

func rangesLen(rs [][2]int64) int64 {
	var n int64
	for _, r := range rs {
		n += r[1] - r[0]
	}
	return n
}

// syncFileLocked makes in's visible data (read from fd) durable.
func (f *FS) syncFileLocked(in *inode, fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	in.mode = st.Mode
	df, err := os.OpenFile(f.durablePath(in.id), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer df.Close()
	if err := df.Truncate(st.Size); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for _, r := range in.dirty {
		for a := r[0]; a < min(r[1], st.Size); {
			n := min(int64(len(buf)), min(r[1], st.Size)-a)
			m, err := syscall.Pread(fd, buf[:n], a)
			if err != nil {
				return err
			}
			if m == 0 {
				break
			}
			if _, err := df.WriteAt(buf[:m], a); err != nil {
				return err
			}
			a += int64(m)
		}
	}
	in.dirty, in.newest = nil, in.newest[:0]
	f.stats.Fsyncs++
	return nil
}

// syncDirLocked makes the visible entries of directory p durable.
func (f *FS) syncDirLocked(p string) error {
	dir, _, err := f.inodeOfPathLocked(p)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	m := make(map[string]uint64, len(ents))
	for _, e := range ents {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(p, e.Name()), &st); err != nil {
			continue // removed meanwhile
		}
		c := f.inodeLocked(st.Ino, st.Mode)
		c.mode = st.Mode
		m[e.Name()] = c.id
		if c.dir && f.dirs[c.id] == nil {
			f.dirs[c.id] = map[string]uint64{}
		}
	}
	f.dirs[dir.id] = m
	f.stats.DirSyncs++
	f.gcLocked()
	return nil
}

// usedLocked is the visible bytes (for Capacity).
func (f *FS) usedLocked() int64 {
	var n int64
	_ = filepath.Walk(f.visible, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// node is a loopback node whose changes go through the model.
type node struct {
	fs.LoopbackNode
	fs  *FS
	gen *generation
}

func (n *node) path() string { return filepath.Join(n.RootData.Path, n.Path(n.Root())) }
