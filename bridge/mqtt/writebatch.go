package mqtt

import (
	"errors"
	"net"
	"sync"
	"time"
)

// coalescingConn gathers writes and sends them from one goroutine, so that a
// burst of PUBACKs (released together after a group commit) costs one write
// syscall instead of one each. paho writes every packet with its own Write.
//
// Write returns once the bytes are queued; a send error is returned by the
// next Write (and the reader sees the broken connection anyway). At most
// maxPendingWrite bytes wait: beyond that Write blocks, as a full socket
// would. Close sends what is queued (for at most closeFlushTimeout) first.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	cond    *sync.Cond // signalled when pending shrinks or the flusher stops
	pending []byte
	spare   []byte
	err     error // first send error
	closing bool
	wake    chan struct{} // capacity 1
	done    chan struct{} // closed when the flusher returns
}

const (
	maxPendingWrite   = 64 << 10
	closeFlushTimeout = time.Second
)

var errConnClosed = errors.New("connection closed")

func newCoalescingConn(c net.Conn) *coalescingConn {
	w := &coalescingConn{Conn: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.flush()
	return w
}

func (w *coalescingConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.err == nil && !w.closing && len(w.pending) > 0 && len(w.pending)+len(p) > maxPendingWrite {
		w.cond.Wait()
	}
	switch {
	case w.err != nil:
		return 0, w.err
	case w.closing:
		return 0, errConnClosed
	}
	w.pending = append(w.pending, p...)
	select {
	case w.wake <- struct{}{}:
	default: // the flusher is already due to run
	}
	return len(p), nil
}

// flush sends what is pending until Close.
func (w *coalescingConn) flush() {
	defer close(w.done)
	for range w.wake {
		w.mu.Lock()
		buf := w.pending
		w.pending = w.spare[:0]
		closing := w.closing
		w.mu.Unlock()
		var err error
		if len(buf) > 0 {
			_, err = w.Conn.Write(buf)
		}
		w.mu.Lock()
		w.spare = buf[:0]
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		if closing || err != nil {
			return
		}
	}
}

// Close sends what is queued, then closes the connection.
func (w *coalescingConn) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return w.Conn.Close()
	}
	w.closing = true
	w.cond.Broadcast()
	w.mu.Unlock()
	// A peer that reads nothing must not hold Close (and paho's reconnect) up.
	_ = w.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	return w.Conn.Close()
}
