package serial

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// Line is a serial device held the way a Port holds it — claimed in this
// process, flocked against other edgeq processes, opened into reserved low
// fds and read with the library's select panic contained — for bridges that
// speak a request/response protocol over a serial line (bridge/modbus).
// Open, Read, Write, ResetInput, SetReadTimeout and CloseDevice are called by
// one goroutine; Release once at the end.
type Line struct {
	owner  string // in the registry and in errors
	path   string // cleaned configured path
	mode   LineMode
	logger *slog.Logger

	mu      sync.Mutex // guards the fields below against Release
	reserve fdReserve  // guarded by openMu as well
	c       *conn
	done    bool
}

// NewLine claims path for owner (refused when another Port or Line of this
// process has it) and reserves the low fds it will open into. Call it early,
// while the process has few files open. It opens nothing.
func NewLine(owner, path string, mode LineMode, logger *slog.Logger) (*Line, error) {
	var errs []string
	mode.Check(func(key, format string, args ...any) { errs = append(errs, key+": "+fmt.Sprintf(format, args...)) })
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: serial[%s]: %v", ErrInvalidConfig, owner, errs)
	}
	if logger == nil {
		logger = slog.Default()
	}
	l := &Line{owner: owner, path: filepath.Clean(path), mode: mode, logger: logger}
	if err := claims.claimConfigured(l.path, owner); err != nil {
		return nil, fmt.Errorf("serial[%s]: %w", owner, err)
	}
	openMu.Lock()
	if n, err := l.reserve.fill(reservedFDs); err != nil {
		logger.Warn("low fds not reserved: the line is refused when it opens at fd >= 1024", "held", n, "err", err)
	}
	openMu.Unlock()
	return l, nil
}

// Open opens the device (resolving the path anew: a replugged adapter's
// by-id link may point elsewhere) and returns the device it opened.
// ErrFDLimit, ErrPortInUse and ErrPortLocked are wrapped as for a Port.
func (l *Line) Open(readTimeout time.Duration) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return "", fmt.Errorf("serial[%s]: line released", l.owner)
	}
	if l.c != nil {
		return l.c.resolved, nil
	}
	c, err := openDevice(l.owner, l.path, l.mode.library(), readTimeout, &l.reserve, l.logger)
	if err != nil {
		return "", err
	}
	l.c = c
	return c.resolved, nil
}

// IsOpen says whether the device is open.
func (l *Line) IsOpen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c != nil
}

func (l *Line) conn() (*conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return nil, fmt.Errorf("serial[%s]: line not open", l.owner)
	}
	return l.c, nil
}

// Read reads what the device has, waiting at most the read timeout: (0, nil)
// when nothing came (go.bug.st/serial's convention). Any error means the
// device is gone: close it and open it again later.
func (l *Line) Read(p []byte) (int, error) {
	c, err := l.conn()
	if err != nil {
		return 0, err
	}
	return readGuarded(c.port, p)
}

// Write writes p. The tty buffers it: Write returns before the bytes are on
// the wire.
func (l *Line) Write(p []byte) (int, error) {
	c, err := l.conn()
	if err != nil {
		return 0, err
	}
	return c.port.Write(p)
}

// SetReadTimeout sets how long the next Reads wait for data.
func (l *Line) SetReadTimeout(d time.Duration) error {
	c, err := l.conn()
	if err != nil {
		return err
	}
	return c.port.SetReadTimeout(d)
}

// ResetInput discards what was received and not read yet.
func (l *Line) ResetInput() error {
	c, err := l.conn()
	if err != nil {
		return err
	}
	return c.port.ResetInputBuffer()
}

// CloseDevice closes the device; Open may open it again.
func (l *Line) CloseDevice() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		closeDevice(l.c, l.owner, &l.reserve, l.logger)
		l.c = nil
	}
}

// Release closes the device, gives the reserved fds back and drops the claim
// on the path. The Line cannot be opened again.
func (l *Line) Release() {
	l.mu.Lock()
	if l.c != nil {
		closeDevice(l.c, l.owner, &l.reserve, l.logger)
		l.c = nil
	}
	if !l.done {
		l.done = true
		openMu.Lock()
		l.reserve.release()
		openMu.Unlock()
		claims.releaseConfigured(l.path, l.owner)
	}
	l.mu.Unlock()
}
