package serial

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bugst "go.bug.st/serial"
	"golang.org/x/sys/unix"
)

// fillFDs opens /dev/null until an fd at or above above is returned, so
// every lower fd is in use (Linux hands out the lowest free one). It returns
// a function that closes them all.
func fillFDs(t testing.TB, above int) (release func()) {
	t.Helper()
	var fds []int
	release = func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		fds = nil
	}
	t.Cleanup(func() { release() })
	for range 20000 {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("fill fds: %v (after %d)", err, len(fds))
		}
		fds = append(fds, fd)
		if fd >= above {
			return release
		}
	}
	t.Fatal("fill fds: never reached the limit")
	return nil
}

// TestSelectFDsMatchesLibrary pins the layout of go.bug.st/serial read by
// selectFDs: the first fd is the tty itself, the second a pipe. If a new
// library version changes it, this fails (and checkSelectable falls back to
// the probe).
func TestSelectFDsMatchesLibrary(t *testing.T) {
	s := newSensor(t)
	port, err := bugst.Open(s.path, &bugst.Mode{BaudRate: 115200})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	fds, ok := selectFDs(port)
	if !ok || len(fds) != 2 {
		t.Fatalf("selectFDs = %v, %v: the library's layout changed", fds, ok)
	}
	var tty, node, pipe unix.Stat_t
	if err := unix.Fstat(fds[0], &tty); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(s.path, &node); err != nil {
		t.Fatal(err)
	}
	if tty.Rdev != node.Rdev || tty.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Fatalf("fd %d is not %s", fds[0], s.path)
	}
	if err := unix.Fstat(fds[1], &pipe); err != nil || pipe.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("fd %d is not the close-signal pipe: %v", fds[1], err)
	}
	if err := checkSelectable(port); err != nil {
		t.Fatal(err)
	}
	if _, ok := selectFDs(fakePort{}); ok {
		t.Fatal("selectFDs accepted a port of another type")
	}
}

// fakePort is a bugst.Port whose Read panics like the library's FdSet does.
type fakePort struct{ bugst.Port }

func (fakePort) Read([]byte) (int, error) {
	var set unix.FdSet
	set.Set(fdSetSize + 3) // index out of range, as with fd 1027
	return 0, nil
}

func TestReadGuardedRecoversPanic(t *testing.T) {
	n, err := readGuarded(fakePort{}, make([]byte, 8))
	var pe *readPanicError
	if n != 0 || !errors.As(err, &pe) || !strings.Contains(err.Error(), "index out of range") || len(pe.stack) == 0 {
		t.Fatalf("readGuarded = %d, %v; want the recovered panic as an error", n, err)
	}
}

func TestFDReserve(t *testing.T) {
	openMu.Lock()
	defer openMu.Unlock()
	var r fdReserve
	if n, err := r.fill(reservedFDs); err != nil || n != reservedFDs {
		t.Fatalf("fill = %d, %v", n, err)
	}
	for _, fd := range r.fds {
		if fd >= fdSetSize {
			t.Fatalf("reserved fd %d", fd)
		}
	}
	held := append([]int(nil), r.fds...)
	r.release()
	if len(r.fds) != 0 {
		t.Fatal("release kept fds")
	}
	// The lowest free fd is now one of those released.
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(fd)
	if fd > held[len(held)-1] {
		t.Fatalf("fd %d opened after release, want one of %v or lower", fd, held)
	}

	release := fillFDs(t, fdSetSize+8)
	if n, err := r.fill(reservedFDs); err == nil || n != 0 {
		t.Fatalf("fill with no low fd free = %d, %v; want 0 and an error", n, err)
	}
	release()
}

// TestPortOpensLowWithManyFilesOpen: a port started while fds were few
// keeps reserved low fds; when the process later has more than 1024 files
// open, the port still opens below the select limit and reads.
func TestPortOpensLowWithManyFilesOpen(t *testing.T) {
	link := filepath.Join(t.TempDir(), "by-id")
	log := openLog(t)
	p := startPort(t, portConfig("manyfds", link), log)

	fillFDs(t, fdSetSize+64)
	s := newSensor(t) // its own fds are above 1024 now
	pointLink(t, link, s.path)
	waitOpen(t, p, s.path)
	for i := range 20 {
		s.write(t, meterFrame("m", i))
	}
	waitStored(t, p, 20)
	if st := p.Status(); st.FDRefusals != 0 {
		t.Fatalf("refused at open although fds were reserved: %+v", st)
	}
}

// TestPortRefusesHighFDs: with every fd below 1024 taken and nothing
// reserved, the port's fds land above the limit; it is refused with a
// clear error and counted — no panic — and opens once fds are free again.
func TestPortRefusesHighFDs(t *testing.T) {
	link := filepath.Join(t.TempDir(), "by-id")
	log := openLog(t)
	release := fillFDs(t, fdSetSize+64)
	s := newSensor(t)
	pointLink(t, link, s.path)
	p := startPort(t, portConfig("highfds", link), log)

	waitFor(t, "the port refused for its fds", func() bool {
		st := p.Status()
		return st.FDRefusals >= 1 && strings.Contains(st.LastError, ErrFDLimit.Error())
	})
	if st := p.Status(); st.Opens != 0 || st.Open {
		t.Fatalf("the port was read with high fds: %+v", st)
	}
	s.write(t, meterFrame("m", 0)) // waits in the pty

	release()
	waitOpen(t, p, s.path)
	s.write(t, meterFrame("m", 1))
	waitStored(t, p, 2)
}

func TestCheckSelectableRefusesHighFD(t *testing.T) {
	release := fillFDs(t, fdSetSize+8)
	defer release()
	s := newSensor(t)
	port, err := bugst.Open(s.path, &bugst.Mode{BaudRate: 9600})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	if err := checkSelectable(port); !errors.Is(err, ErrFDLimit) {
		t.Fatalf("checkSelectable = %v, want ErrFDLimit", err)
	}
	if err := probeFDs(); !errors.Is(err, ErrFDLimit) {
		t.Fatalf("probeFDs = %v, want ErrFDLimit", err)
	}
}
