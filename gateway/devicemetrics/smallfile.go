package devicemetrics

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// smallFileMax bounds what readSmallFile reads. Every file read with it holds
// one short value (a temperature, a zone type, /proc/uptime).
const smallFileMax = 128

var errFileTooLong = fmt.Errorf("file longer than %d bytes", smallFileMax)

// readSmallFile returns the trimmed contents of a one-value proc or sysfs
// file using a single read(2), as procfs does for sysfs: some drivers
// return EAGAIN, and os.ReadFile would then poll forever; others return
// EINVAL or ENODATA while a sensor is not ready. Any such error is returned,
// so the caller leaves the value out. O_NONBLOCK keeps a FIFO or a
// misbehaving device node from hanging a scrape in open or read.
func readSmallFile(path string) (string, error) {
	fd, err := openRetrying(path)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)

	var buf [smallFileMax]byte
	n, err := readRetrying(fd, buf[:])
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if n == len(buf) {
		return "", fmt.Errorf("read %s: %w", path, errFileTooLong)
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

func openRetrying(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

func readRetrying(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
