package powerfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The node overrides every operation that changes state: each takes the
// model's lock, answers the fault switch (and EIO once the power is cut),
// calls the loopback operation and records what became pending.

var (
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
)

func (n *node) lock(k change) syscall.Errno {
	n.fs.mu.Lock()
	if e := n.fs.faultLocked(n.gen, k); e != 0 {
		n.fs.mu.Unlock()
		return e
	}
	return 0
}

func (n *node) unlock() { n.fs.mu.Unlock() }

// rel is the node's path relative to the mount point, joined with name.
func (n *node) rel(name string) string {
	p := n.Path(n.Root())
	if name == "" {
		return p
	}
	if p == "" {
		return name
	}
	return p + "/" + name
}

// event reports an applied change to the armed trigger (lock held).
func (n *node) event(op Op, name string) {
	n.fs.eventLocked(n.gen, func() Event { return Event{Op: op, Path: n.rel(name)} })
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(chCreate); e != 0 {
		return nil, nil, 0, e
	}
	defer n.unlock()
	ch, fh, ff, e := n.LoopbackNode.Create(ctx, name, readable(flags), mode, out)
	if e != 0 {
		return ch, fh, ff, e
	}
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		lf.Release(ctx)
		return nil, nil, 0, fs.ToErrno(err)
	}
	in := n.fs.inodeLocked(st.Ino, st.Mode)
	in.open++
	n.event(OpCreate, name)
	cn, ok := ch.Operations().(*node)
	if !ok {
		cn = n
	}
	return ch, &file{lf: lf, n: cn, in: in, fd: fd}, ff, 0
}

// readable turns write-only opens into read-write ones: fsync copies the
// data it makes durable through the same descriptor.
func readable(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	writing := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if writing {
		if e := n.fs.faultLocked(n.gen, chRemove); e != 0 && e != syscall.ENOSPC {
			return nil, 0, e
		}
	}
	p := n.path()
	in, st, err := n.fs.inodeOfPathLocked(p)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	fh, ff, e := n.LoopbackNode.Open(ctx, readable(flags))
	if e != 0 {
		return fh, ff, e
	}
	if flags&syscall.O_TRUNC != 0 {
		in.dirty = addRange(in.dirty, 0, st.Size)
		n.event(OpTruncate, "")
	}
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	in.open++
	return &file{lf: lf, n: n, in: in, fd: fd}, ff, 0
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, e := n.LoopbackNode.OpendirHandle(ctx, flags)
	if e != 0 {
		return fh, ff, e
	}
	return &dirHandle{inner: fh, n: n}, ff, 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if pf, ok := f.(*file); ok {
		return pf.Setattr(ctx, in, out)
	}
	if e := n.lock(chRemove); e != 0 {
		return e
	}
	defer n.unlock()
	p := n.path()
	rec, st, err := n.fs.inodeOfPathLocked(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	if e := n.LoopbackNode.Setattr(ctx, nil, in, out); e != 0 {
		return e
	}
	if sz, ok := in.GetSize(); ok {
		rec.dirty = addRange(rec.dirty, min(st.Size, int64(sz)), max(st.Size, int64(sz)))
		n.event(OpTruncate, "")
	}
	return 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(chCreate); e != 0 {
		return nil, e
	}
	defer n.unlock()
	ch, e := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if e == 0 {
		n.event(OpCreate, name)
	}
	return ch, e
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(chCreate); e != 0 {
		return nil, e
	}
	defer n.unlock()
	ch, e := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if e == 0 {
		n.event(OpCreate, name)
	}
	return ch, e
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(chCreate); e != 0 {
		return nil, e
	}
	defer n.unlock()
	ch, e := n.LoopbackNode.Symlink(ctx, target, name, out)
	if e == 0 {
		n.event(OpCreate, name)
	}
	return ch, e
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(chCreate); e != 0 {
		return nil, e
	}
	defer n.unlock()
	ch, e := n.LoopbackNode.Link(ctx, target, name, out)
	if e == 0 {
		n.event(OpCreate, name)
	}
	return ch, e
}

// lstatChild is the child's stat before a change that may remove it.
func (n *node) lstatChild(name string) *syscall.Stat_t {
	var st syscall.Stat_t
	if syscall.Lstat(filepath.Join(n.path(), name), &st) != nil {
		return nil
	}
	return &st
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, n.LoopbackNode.Unlink)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, n.LoopbackNode.Rmdir)
}

// remove runs unlink or rmdir and forgets the visible inode it freed.
func (n *node) remove(ctx context.Context, name string, op func(context.Context, string) syscall.Errno) syscall.Errno {
	if e := n.lock(chRemove); e != 0 {
		return e
	}
	defer n.unlock()
	st := n.lstatChild(name)
	e := op(ctx, name)
	if e == 0 {
		n.fs.unlinkedLocked(st)
		n.event(OpUnlink, name)
	}
	return e
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.lock(chRemove); e != 0 {
		return e
	}
	defer n.unlock()
	src := n.lstatChild(name)
	var dst *syscall.Stat_t
	if np, ok := newParent.(*node); ok && flags&unix.RENAME_EXCHANGE == 0 {
		dst = np.lstatChild(newName)
	}
	e := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if e == 0 && dst != nil && (src == nil || src.Ino != dst.Ino) {
		n.fs.unlinkedLocked(dst) // replaced
	}
	if e == 0 {
		n.fs.eventLocked(n.gen, func() Event {
			to := newName
			if np, ok := newParent.(*node); ok {
				to = np.rel(newName)
			}
			return Event{Op: OpRename, Path: n.rel(name), To: to}
		})
	}
	return e
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if e := n.lock(chRemove); e != 0 {
		return e
	}
	defer n.unlock()
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if e := n.lock(chRemove); e != 0 {
		return e
	}
	defer n.unlock()
	return n.LoopbackNode.Removexattr(ctx, attr)
}

// CopyFileRange is refused so the kernel falls back to reads and writes,
// which the model sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, l uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	switch h := f.(type) {
	case *file:
		return h.Fsync(ctx, flags)
	case *dirHandle:
		return h.Fsyncdir(ctx, flags)
	}
	if e := n.lock(chSync); e != 0 {
		return e
	}
	defer n.unlock()
	p := n.path()
	if n.IsDir() {
		return fs.ToErrno(n.fs.syncDirLocked(p))
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	in, _, err := n.fs.inodeOfPathLocked(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	return fs.ToErrno(n.fs.syncFileLocked(in, fd))
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if n.fs.opts.Capacity <= 0 {
		return n.LoopbackNode.Statfs(ctx, out)
	}
	n.fs.mu.Lock()
	used := n.fs.usedLocked()
	n.fs.visUsed = used
	n.fs.mu.Unlock()
	const bs = 4096
	free := max(n.fs.opts.Capacity-used, 0)
	*out = fuse.StatfsOut{Bsize: bs, Frsize: bs, Blocks: uint64(n.fs.opts.Capacity / bs),
		Bfree: uint64(free / bs), Bavail: uint64(free / bs), Files: 1 << 20, Ffree: 1 << 19, NameLen: 255}
	return 0
}

// file is an open regular file. It forwards to the loopback file only what
// the model sees (no passthrough fd, no ioctl): the kernel must send every
// write here.
type file struct {
	lf *fs.LoopbackFile
	n  *node
	in *inode
	fd int
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileWritever  = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	x := f.n.fs
	if e := f.n.lock(chWrite); e != 0 {
		return 0, e
	}
	defer f.n.unlock()
	if c := x.opts.Capacity; c > 0 {
		var st syscall.Stat_t
		if err := syscall.Fstat(f.fd, &st); err != nil {
			return 0, fs.ToErrno(err)
		}
		grow := max(off+int64(len(data))-st.Size, 0)
		if x.visUsed+grow > c {
			x.visUsed = x.usedLocked()
			if x.visUsed+grow > c {
				return 0, syscall.ENOSPC
			}
		}
		x.visUsed += grow
	}
	w, e := f.lf.Write(ctx, data, off)
	if w > 0 {
		in := f.in
		in.dirty = addRange(in.dirty, off, off+int64(w))
		in.newestOff = off
		in.newest = append(in.newest[:0], data[:w]...)
		x.stats.Writes++
		f.n.event(OpWrite, "")
	}
	return w, e
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	return f.Write(ctx, all, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if e := f.n.lock(chSync); e != 0 {
		return e
	}
	defer f.n.unlock()
	if err := f.n.fs.syncFileLocked(f.in, f.fd); err != nil {
		return fs.ToErrno(err)
	}
	f.n.event(OpFsync, "")
	return 0
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.lf.Flush(ctx) }

func (f *file) Release(ctx context.Context) syscall.Errno {
	f.n.fs.mu.Lock()
	f.in.open--
	f.n.fs.mu.Unlock()
	return f.lf.Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := f.n.lock(chRemove); e != 0 {
		return e
	}
	defer f.n.unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	if e := f.lf.Setattr(ctx, in, out); e != 0 {
		return e
	}
	if sz, ok := in.GetSize(); ok {
		f.in.dirty = addRange(f.in.dirty, min(st.Size, int64(sz)), max(st.Size, int64(sz)))
		f.n.event(OpTruncate, "")
	}
	return 0
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if e := f.n.lock(chWrite); e != 0 {
		return e
	}
	defer f.n.unlock()
	e := f.lf.Allocate(ctx, off, size, mode)
	if e == 0 {
		f.in.dirty = addRange(f.in.dirty, int64(off), int64(off+size))
	}
	return e
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}

// dirHandle is an open directory; its fsync makes the entries durable.
type dirHandle struct {
	inner fs.FileHandle
	n     *node
}

var (
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if e := d.n.lock(chSync); e != 0 {
		return e
	}
	defer d.n.unlock()
	if err := d.n.fs.syncDirLocked(d.n.path()); err != nil {
		return fs.ToErrno(err)
	}
	d.n.event(OpFsyncDir, "")
	return 0
}
