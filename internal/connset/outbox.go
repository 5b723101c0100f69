package connset

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Outbox is a connection's pending output, shared by every TCP front end:
// producers (the reader goroutine, queue groups delivering) append to Out
// under the lock and Signal; the connection's writer goroutine waits on Wake
// and calls Flush, which swaps the buffer out and writes it without the
// lock, so a slow socket never blocks a producer. A connection embeds it:
// its lock also guards the connection's own output state.
type Outbox struct {
	sync.Mutex
	Out    []byte // pending output; guarded by the lock; the caller bounds it (max_pending)
	Closed bool   // no more output is taken; guarded by the lock

	spare []byte
	wake  chan struct{} // cap 1: output pending or closing
}

// spareMax is the largest written buffer kept for the next swap: a burst's
// larger one is let go, so an idle connection holds little.
const spareMax = 64 << 10

// Init makes the wake channel; call it before the outbox is shared.
func (o *Outbox) Init() { o.wake = make(chan struct{}, 1) }

// Wake is signalled when output is pending or the outbox closes.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Signal wakes the writer; it never blocks. Producers call it after an
// append, with or without the lock.
func (o *Outbox) Signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Append queues b unless the outbox is closed, and wakes the writer.
func (o *Outbox) Append(b []byte) {
	o.Lock()
	defer o.Unlock()
	if o.Closed {
		return
	}
	o.Out = append(o.Out, b...)
	o.Signal()
}

// Close marks the outbox closed (what is queued is still flushed) and
// wakes the writer; false when it was closed already.
func (o *Outbox) Close() bool {
	o.Lock()
	first := !o.Closed
	o.Closed = true
	o.Unlock()
	o.Signal()
	return first
}

// Flush writes what is pending to nc, each write bounded by deadline.
// closed reports that the outbox was closed when its output was taken:
// everything queued has then been written and the writer should end. A
// failed write returns its error (TimedOut tells a deadline). atSwap,
// when set, runs under the lock as the output is taken (to take state that
// belongs with exactly this output, as a TLS upgrade after it).
func (o *Outbox) Flush(nc net.Conn, deadline time.Duration, atSwap func()) (closed bool, err error) {
	o.Lock()
	buf := o.Out
	o.Out = o.spare[:0]
	closed = o.Closed
	if atSwap != nil {
		atSwap()
	}
	o.Unlock()
	if len(buf) > 0 {
		_ = nc.SetWriteDeadline(time.Now().Add(deadline))
		if _, err := nc.Write(buf); err != nil {
			return closed, err
		}
	}
	o.Lock()
	if cap(buf) <= spareMax {
		o.spare = buf[:0]
	} else {
		o.spare = nil
	}
	o.Unlock()
	return closed, nil
}

// TimedOut reports whether err is a read or write that hit its deadline (a
// slow consumer, a silent client) rather than a broken connection.
func TimedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
