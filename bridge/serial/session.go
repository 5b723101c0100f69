package serial

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	bugst "go.bug.st/serial"

	"edgeq/internal/backoff"
)

// conn is one open session of the port and what must be released with it.
type conn struct {
	port     bugst.Port
	lock     deviceLock
	resolved string
}

// run opens, reads and reopens the port until ctx ends. Any read error
// means the device is gone (an unplugged USB tty and a local Close give the
// same error, GOTCHAS 3): close, back off, wait for the path, reopen.
func (p *Port) run(ctx context.Context, path string) {
	defer close(p.done)
	defer func() {
		openMu.Lock()
		p.reserve.release()
		openMu.Unlock()
		claims.releaseConfigured(path, p.cfg.Name)
	}()
	p.ctx = ctx
	attempt := 0
	for ctx.Err() == nil {
		c, err := p.open()
		if err != nil {
			p.openFailures.Add(1)
			p.noteError(err)
		} else {
			before := p.framesIn.Load()
			err := p.session(ctx, c)
			if ctx.Err() != nil {
				return
			}
			p.noteError(fmt.Errorf("serial[%s]: read %s: %w", p.cfg.Name, c.resolved, err))
			if p.framesIn.Load() > before {
				attempt = 0 // it worked for a while: start the backoff over
			}
		}
		wait := backoff.Policy{Min: p.cfg.ReopenMin, Max: p.cfg.ReopenMax}.Delay(attempt, p.rnd.Float64())
		attempt++
		if !backoff.Sleep(ctx.Done(), wait) {
			return
		}
	}
}

// open resolves the path, claims and locks the device and opens it.
func (p *Port) open() (*conn, error) {
	c, err := openDevice(p.cfg.Name, p.cfg.Path, p.cfg.mode(), p.cfg.ReadTimeout, &p.reserve, p.logger)
	if errors.Is(err, ErrFDLimit) {
		p.fdRefusals.Add(1)
	}
	return c, err
}

// close releases everything the session held; the port's freed fds become
// the reserve again.
func (p *Port) close(c *conn) { closeDevice(c, p.cfg.Name, &p.reserve, p.logger) }

// openDevice resolves path, claims and locks the device and opens it into
// the reserved low fds. The path is resolved on every attempt: a replugged
// adapter's by-id link may point at another ttyUSBn. A port whose fds could
// not go into select is refused with ErrFDLimit.
func openDevice(name, path string, mode *bugst.Mode, readTimeout time.Duration, reserve *fdReserve, logger *slog.Logger) (*conn, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("serial[%s]: waiting for %s: %w", name, path, err)
	}
	if err := claims.claimOpen(resolved, name); err != nil {
		return nil, fmt.Errorf("serial[%s]: %w", name, err)
	}
	lock, err := lockDevice(resolved)
	if err != nil {
		claims.releaseOpen(resolved, name)
		return nil, fmt.Errorf("serial[%s]: %w", name, err)
	}
	port, err := openSerial(resolved, mode, readTimeout, reserve, logger)
	if err != nil {
		lock.release()
		claims.releaseOpen(resolved, name)
		return nil, fmt.Errorf("serial[%s]: %w", name, err)
	}
	return &conn{port: port, lock: lock, resolved: resolved}, nil
}

// openSerial opens the device into the reserved low fds and refuses it when
// its fds could not go into select (fdguard.go).
func openSerial(device string, mode *bugst.Mode, readTimeout time.Duration, reserve *fdReserve, logger *slog.Logger) (bugst.Port, error) {
	openMu.Lock()
	defer openMu.Unlock()
	reserve.release()
	port, err := bugst.Open(device, mode)
	if err != nil {
		refillReserve(reserve, logger)
		return nil, fmt.Errorf("open %s: %w", device, err)
	}
	if err := checkSelectable(port); err != nil {
		_ = port.Close()
		refillReserve(reserve, logger)
		return nil, fmt.Errorf("open %s: %w", device, err)
	}
	if err := port.SetReadTimeout(readTimeout); err != nil {
		_ = port.Close()
		refillReserve(reserve, logger)
		return nil, fmt.Errorf("open %s: set read timeout: %w", device, err)
	}
	return port, nil
}

// refillReserve takes low fds back after a port's were freed. openMu held.
func refillReserve(reserve *fdReserve, logger *slog.Logger) {
	if n, err := reserve.fill(reservedFDs); err != nil {
		logger.Debug("low fds not reserved", "held", n, "err", err)
	}
}

// closeDevice releases everything a session held; the port's freed fds
// become the reserve again.
func closeDevice(c *conn, name string, reserve *fdReserve, logger *slog.Logger) {
	openMu.Lock()
	if err := c.port.Close(); err != nil {
		logger.Debug("close serial port", "err", err)
	}
	refillReserve(reserve, logger)
	openMu.Unlock()
	c.lock.release()
	claims.releaseOpen(c.resolved, name)
}

// session reads the open port until a read error or the end of ctx, and
// closes it. A partial frame left when it closes is counted as incomplete.
func (p *Port) session(ctx context.Context, c *conn) error {
	if p.opens.Add(1) > 1 {
		p.logger.Info("serial port reopened", "device", c.resolved)
	} else {
		p.logger.Info("serial port open", "device", c.resolved)
	}
	p.setOpen(true, c.resolved)
	defer func() {
		p.setOpen(false, c.resolved)
		p.close(c)
		if p.framer.Reset() {
			p.framesIn.Add(1)
			p.drop(DropIncomplete, nil, nil)
		}
	}()
	for ctx.Err() == nil {
		n, err := readGuarded(c.port, p.readBuf)
		if n > 0 {
			p.bytesIn.Add(uint64(n))
			p.framer.Feed(p.readBuf[:n], p.onFrame)
		}
		if err != nil {
			if pe := (*readPanicError)(nil); errors.As(err, &pe) {
				p.logger.Error("serial read panicked; closing the port", "err", pe, "stack", string(pe.stack))
			}
			return err
		}
	}
	return nil
}
