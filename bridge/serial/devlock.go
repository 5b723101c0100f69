package serial

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// deviceLock is an exclusive flock on a device node, held through an fd of
// its own: another edgeq process (which takes the same lock) cannot open the
// port, even as root. The fd is opened read-only, non-blocking (a UART
// without carrier would block the open) and without becoming the
// controlling terminal. It is never passed to select, so its number does not
// matter.
type deviceLock struct {
	fd int
}

func lockDevice(path string) (deviceLock, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return deviceLock{fd: -1}, fmt.Errorf("open %s for locking: %w", path, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return deviceLock{fd: -1}, fmt.Errorf("%w: flock %s", ErrPortLocked, path)
		}
		return deviceLock{fd: -1}, fmt.Errorf("flock %s: %w", path, err)
	}
	return deviceLock{fd: fd}, nil
}

// release drops the lock (closing the fd releases it).
func (l *deviceLock) release() {
	if l.fd >= 0 {
		_ = unix.Close(l.fd)
		l.fd = -1
	}
}
