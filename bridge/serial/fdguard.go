package serial

import (
	"fmt"
	"reflect"
	"runtime/debug"
	"sync"
	"unsafe"

	bugst "go.bug.st/serial"
	"golang.org/x/sys/unix"
)

// go.bug.st/serial v1.8.0 reads through select(2) with a unix.FdSet, and
// FdSet.Set indexes a fixed array: a tty or close-signal pipe fd >= 1024
// panics in Read and would take the whole node down (GOTCHAS 3). Go raises
// RLIMIT_NOFILE at start, so a busy broker does reach such fds, typically
// when a port is reopened after an unplug. Three layers, because none alone
// is enough:
//
//  1. Prevention: each started Port holds reservedFDs placeholder fds on
//     /dev/null, taken while the process has few files open. Just before
//     serial.Open they are closed, and Linux hands out the lowest free fd, so
//     the tty and the pipe land in them. Another goroutine may still take a
//     freed slot in between, hence 2.
//  2. Exact check: after serial.Open the fds the library will put into
//     select are read (selectFDs) and a port with one >= fdSetSize is closed
//     and refused with ErrFDLimit, counted and retried with backoff. A probe
//     fd opened after serial.Open would be only a guess: it says nothing
//     about where the pipe landed. If the library's layout ever changes, the
//     probe is the fallback, and a test fails so that someone looks.
//  3. Containment: readGuarded turns a panic inside Read into an error.

// fdSetSize is FD_SETSIZE: the number of fds a unix.FdSet can hold.
const fdSetSize = int(unsafe.Sizeof(unix.FdSet{})) * 8

// reservedFDs: the tty and the library's pipe pair.
const reservedFDs = 3

// probeLimit is the fallback's threshold, below fdSetSize to keep a margin
// for the fds the probe cannot see.
const probeLimit = fdSetSize - 24

// openMu serializes the release of reserved fds, serial.Open and the check
// across all ports of the process, so two ports do not take each other's
// reserved slots.
var openMu sync.Mutex

// fdReserve holds placeholder fds below fdSetSize. Guarded by openMu.
type fdReserve struct {
	fds []int
}

// fill opens placeholders until the reserve holds n fds below fdSetSize. A
// placeholder at or above the limit would not help: it is closed and filling
// stops. It returns how many are held.
func (r *fdReserve) fill(n int) (int, error) {
	for len(r.fds) < n {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return len(r.fds), fmt.Errorf("reserve low fds: %w", err)
		}
		if fd >= fdSetSize {
			_ = unix.Close(fd)
			return len(r.fds), fmt.Errorf("reserve low fds: got fd %d, all below %d are in use", fd, fdSetSize)
		}
		r.fds = append(r.fds, fd)
	}
	return len(r.fds), nil
}

// release closes the placeholders, so the next fds opened take their numbers.
func (r *fdReserve) release() {
	for _, fd := range r.fds {
		_ = unix.Close(fd)
	}
	r.fds = r.fds[:0]
}

// selectFDs returns the fds go.bug.st/serial v1.8.0 passes to select(2) in
// Read: the tty (unixPort.handle) and the read end of the close-signal pipe
// (unixPort.closeSignal.rd). The library has no accessor, so they are read
// from its unexported fields; ok is false when the layout is not that one.
func selectFDs(port bugst.Port) (fds []int, ok bool) {
	v := reflect.ValueOf(port)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	handle := v.Elem().FieldByName("handle")
	pipe := v.Elem().FieldByName("closeSignal")
	if handle.Kind() != reflect.Int || pipe.Kind() != reflect.Pointer || pipe.IsNil() ||
		pipe.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	rd := pipe.Elem().FieldByName("rd")
	if rd.Kind() != reflect.Int {
		return nil, false
	}
	return []int{int(handle.Int()), int(rd.Int())}, true
}

// checkSelectable returns ErrFDLimit when port's fds cannot go into select.
func checkSelectable(port bugst.Port) error {
	fds, ok := selectFDs(port)
	if !ok {
		return probeFDs()
	}
	for _, fd := range fds {
		if fd < 0 || fd >= fdSetSize {
			return fmt.Errorf("%w: fd %d, select(2) takes fds below %d", ErrFDLimit, fd, fdSetSize)
		}
	}
	return nil
}

// probeFDs is the fallback when the fds cannot be read: the lowest free fd
// right after serial.Open approximates how full the fd table is.
func probeFDs() error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: probe fd: %v", ErrFDLimit, err)
	}
	_ = unix.Close(fd)
	if fd >= probeLimit {
		return fmt.Errorf("%w: probe fd %d after open, refusing above %d", ErrFDLimit, fd, probeLimit)
	}
	return nil
}

// readPanicError is a panic inside the library's Read, recovered.
type readPanicError struct {
	value any
	stack []byte // for the log, not for the status
}

func (e *readPanicError) Error() string {
	return fmt.Sprintf("serial read panicked (recovered): %v", e.value)
}

// readGuarded is port.Read with a panic turned into an error: the library's
// FdSet panics are raised before any I/O and its lock is released by a defer,
// so the port is in a consistent state and can be closed.
func readGuarded(port bugst.Port, buf []byte) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, &readPanicError{value: r, stack: debug.Stack()}
		}
	}()
	return port.Read(buf)
}
