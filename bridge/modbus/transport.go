package modbus

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"edgeq/bridge/serial"
)

// transport carries one request at a time to a slave and its response back.
// do returns the response data (valid until the next call), an
// *ExceptionError, ErrTimeout, ErrCRC, ErrGarbled, or a *linkError when the
// port or connection is gone (the bus then closes it and opens it again).
type transport interface {
	open() (string, error)
	do(q request) ([]byte, error)
	close()
	release()
}

// linkError is the serial port or the connection failing: not an answer of
// the slave.
type linkError struct{ err error }

func (e *linkError) Error() string { return "link: " + e.err.Error() }
func (e *linkError) Unwrap() error { return e.err }

// maxRTUFrame is the largest RTU frame (spec: 256 bytes).
const maxRTUFrame = 256

// maxReadWait bounds one Read, so a closed port is noticed promptly.
const maxReadWait = 100 * time.Millisecond

// rtu speaks Modbus RTU over a serial line: the spec's silence before a
// request, the response timeout counted from the end of the request on the
// wire, the frame length from its header, and after a garbled or corrupt
// frame a wait for silence so the next request starts on a clean line.
type rtu struct {
	line     *serial.Line
	charTime time.Duration
	gap      time.Duration
	timeout  time.Duration
	last     time.Time // end of the last traffic on the line
	tx       [8]byte
	rx       [maxRTUFrame]byte
}

func newRTU(name string, c *RTU, timeout time.Duration, logger *slog.Logger) (*rtu, error) {
	line, err := serial.NewLine(sourcePrefix+name, c.Path, c.mode(), logger)
	if err != nil {
		return nil, err
	}
	return &rtu{line: line, charTime: c.charTime(), gap: c.frameGap(), timeout: timeout}, nil
}

func (t *rtu) open() (string, error) { return t.line.Open(maxReadWait) }
func (t *rtu) close()                { t.line.CloseDevice() }
func (t *rtu) release()              { t.line.Release() }

func (t *rtu) do(q request) ([]byte, error) {
	if wait := time.Until(t.last.Add(t.gap)); wait > 0 {
		time.Sleep(wait)
	}
	// A late answer to an earlier request must not be taken for this one.
	if err := t.line.ResetInput(); err != nil {
		return nil, &linkError{err}
	}
	frame := appendRTU(t.tx[:0], q)
	start := time.Now()
	if _, err := t.line.Write(frame); err != nil {
		return nil, &linkError{err}
	}
	// Write returns once the tty has the bytes; they are on the wire later.
	sent := start.Add(time.Duration(len(frame)) * t.charTime)
	t.last = sent
	deadline := sent.Add(t.timeout)
	n, want := 0, 3
	for n < want {
		left := time.Until(deadline)
		if left <= 0 {
			if n > 0 {
				t.last = time.Now()
				return nil, fmt.Errorf("%w: %d of %d bytes", ErrTimeout, n, want)
			}
			return nil, ErrTimeout
		}
		if err := t.line.SetReadTimeout(min(left, maxReadWait)); err != nil {
			return nil, &linkError{err}
		}
		k, err := t.line.Read(t.rx[n:want])
		if err != nil {
			return nil, &linkError{err}
		}
		n += k
		if k > 0 {
			t.last = time.Now()
		}
		if want == 3 && n >= 3 {
			fl, err := rtuFrameLen(q, t.rx[:3])
			if err != nil {
				t.resync()
				return nil, err
			}
			want = fl
			// The rest is still on the wire: wait for it rather than wake up
			// for every byte (a CPU saving at low baud rates).
			if rest := time.Duration(want-n) * t.charTime; rest > time.Millisecond {
				time.Sleep(min(rest, time.Until(deadline)))
			}
		}
	}
	data, err := parseRTU(q, t.rx[:want])
	if err != nil {
		t.resync()
	}
	return data, err
}

// resync reads and drops bytes until the line has been silent for a frame
// gap (at least 2ms: a pty has no timing of its own), for at most the
// response timeout, so that a babbling line cannot hold the bus.
func (t *rtu) resync() {
	quiet := max(t.gap, 2*time.Millisecond)
	end := time.Now().Add(t.timeout)
	if t.line.SetReadTimeout(quiet) != nil {
		return
	}
	var sink [64]byte
	for time.Now().Before(end) {
		k, err := t.line.Read(sink[:])
		if err != nil || k == 0 {
			break
		}
	}
	t.last = time.Now()
}

// tcp speaks Modbus TCP: MBAP framing with a transaction number, so a late
// answer to an earlier request is recognized and skipped.
type tcp struct {
	addr    string
	timeout time.Duration
	conn    net.Conn
	tx      uint16
	buf     [maxTCPFrame]byte
}

func newTCP(c *TCP, timeout time.Duration) *tcp { return &tcp{addr: c.Address, timeout: timeout} }

func (t *tcp) open() (string, error) {
	if t.conn != nil {
		return t.addr, nil
	}
	conn, err := net.DialTimeout("tcp", t.addr, max(t.timeout, time.Second))
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", t.addr, err)
	}
	t.conn = conn
	return t.addr, nil
}

func (t *tcp) close() {
	if t.conn != nil {
		_ = t.conn.Close()
		t.conn = nil
	}
}

func (t *tcp) release() { t.close() }

// maxStale bounds the late answers skipped while waiting for one response.
const maxStale = 8

func (t *tcp) do(q request) ([]byte, error) {
	if t.conn == nil {
		// Closed after a timeout mid-frame or a garbled stream: connect again.
		if _, err := t.open(); err != nil {
			return nil, &linkError{err}
		}
	}
	t.tx++
	deadline := time.Now().Add(t.timeout)
	if err := t.conn.SetDeadline(deadline); err != nil {
		return nil, t.fail(err)
	}
	if _, err := t.conn.Write(appendTCP(t.buf[:0], t.tx, q)); err != nil {
		return nil, t.fail(err)
	}
	for range maxStale {
		head := t.buf[:mbapLen]
		if n, err := io.ReadFull(t.conn, head); err != nil {
			if n == 0 && isTimeout(err) {
				return nil, ErrTimeout // nothing half-read: the connection stays usable
			}
			return nil, t.fail(err)
		}
		tx, unit, n, err := parseMBAP(head)
		if err != nil {
			t.close() // the stream is out of step
			return nil, err
		}
		pdu := t.buf[mbapLen : mbapLen+n]
		if _, err := io.ReadFull(t.conn, pdu); err != nil {
			return nil, t.fail(err)
		}
		if tx != t.tx {
			continue // the answer to a request that timed out
		}
		if unit != q.unit {
			return nil, fmt.Errorf("%w: unit %d, want %d", ErrGarbled, unit, q.unit)
		}
		return parsePDU(q, pdu)
	}
	t.close()
	return nil, fmt.Errorf("%w: %d stale answers", ErrGarbled, maxStale)
}

// fail closes the connection after an I/O error: a timeout in the middle of
// a frame leaves the stream out of step too.
func (t *tcp) fail(err error) error {
	t.close()
	if isTimeout(err) {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return &linkError{err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
