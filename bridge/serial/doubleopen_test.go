package serial

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoubleOpenRefused: one device is read by one port only, whether the
// second port names the same path, another link to the device, or runs in
// another process (flock).
func TestDoubleOpenRefused(t *testing.T) {
	s := newSensor(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "by-id-a")
	pointLink(t, link, s.path)
	log := openLog(t)
	a := startPort(t, portConfig("a", link), log)
	waitOpen(t, a, s.path)

	t.Run("same path", func(t *testing.T) {
		b, err := New(portConfig("b", link), log, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Start(context.Background())
		if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "serial[a]") {
			t.Fatalf("Start = %v, want ErrPortInUse naming serial[a]", err)
		}
	})

	t.Run("another link to the open device", func(t *testing.T) {
		other := filepath.Join(dir, "by-path-a")
		pointLink(t, other, s.path)
		b, err := New(portConfig("b", other), log, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Start(context.Background())
		if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), s.path) {
			t.Fatalf("Start = %v, want ErrPortInUse naming %s", err, s.path)
		}
	})

	t.Run("link turns to the open device later", func(t *testing.T) {
		later := filepath.Join(dir, "later")
		pointLink(t, later, filepath.Join(dir, "nothing-yet"))
		b := startPort(t, portConfig("b", later), log)
		pointLink(t, later, s.path)
		waitFor(t, "b refused at open", func() bool {
			return strings.Contains(b.Status().LastError, ErrPortInUse.Error())
		})
		s.write(t, meterFrame("m-a", 1))
		waitStored(t, a, 1)
		if st := b.Status(); st.Open || st.Opens != 0 || st.FramesIn != 0 {
			t.Fatalf("b read the device a holds: %+v", st)
		}
	})
}

// TestFlockRefusesOtherProcess: while another process (flock(1); --close so
// that sleep does not inherit the lock) holds the
// lock on the pty, the port does not open; it does once the lock is gone.
// This is also the proof that flock works on a pty.
func TestFlockRefusesOtherProcess(t *testing.T) {
	s := newSensor(t)
	link := filepath.Join(t.TempDir(), "by-id")
	pointLink(t, link, s.path)

	var holder func()
	if path, err := exec.LookPath("flock"); err == nil {
		cmd := exec.Command(path, "--nonblock", "--close", s.path, "sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		holder = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		// Wait until flock(1) holds it: our own probe is refused.
		waitFor(t, "flock(1) holding the pty", func() bool {
			l, err := lockDevice(s.path)
			if err == nil {
				l.release()
			}
			return errors.Is(err, ErrPortLocked)
		})
	} else {
		// Same semantics: a lock on another open file description.
		fd, err := unix.Open(s.path, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatalf("flock on a pty: %v", err)
		}
		holder = func() { _ = unix.Close(fd) }
	}
	t.Cleanup(holder)

	p := startPort(t, portConfig("locked", link), openLog(t))
	waitFor(t, "the port refused by the lock", func() bool {
		st := p.Status()
		return st.OpenFailures >= 2 && strings.Contains(st.LastError, ErrPortLocked.Error())
	})
	time.Sleep(50 * time.Millisecond)
	if p.Status().Opens != 0 {
		t.Fatal("the port opened although another process holds its lock")
	}
	holder()
	waitOpen(t, p, s.path)
	s.write(t, meterFrame("m", 1))
	waitStored(t, p, 1)
}
