// Package console serves the node's web console: a small embedded page
// (hand-written HTML, CSS and JavaScript, no build step, nothing from the
// network) and the stream of status snapshots it draws from.
//
// One Hub computes one snapshot per interval, encodes it once, and hands the
// same bytes to every open stream; it computes nothing while no stream is
// open. A stream that cannot keep up skips frames (it always gets the newest)
// and never holds up the others.
package console

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTooManyStreams is returned by Subscribe beyond the stream bound.
var ErrTooManyStreams = errors.New("console: too many open event streams")

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("console: closed")

// Stats are the hub's counters, for /metrics.
type Stats struct {
	Streams    int    // open now
	MaxStreams int    // the bound
	Opened     uint64 // streams accepted
	Refused    uint64 // streams refused at the bound
	Snapshots  uint64 // snapshots computed (one per interval while streams are open)
	Skipped    uint64 // frames a slow stream never got (it got a newer one)
}

// Hub fans one snapshot per interval out to the open streams.
type Hub struct {
	encode   func() ([]byte, error) // one snapshot, encoded
	interval time.Duration
	max      int

	mu      sync.Mutex
	subs    map[*Stream]struct{} // bound: max
	running bool
	closed  bool
	last    []byte // the newest frame, for a stream that joins between ticks
	stop    chan struct{}

	opened, refused, snapshots, skipped atomic.Uint64
}

// Stream is one subscriber: Frames delivers encoded snapshots, the newest
// only when the reader falls behind; it is closed when the hub closes.
type Stream struct {
	h      *Hub
	frames chan []byte
}

// NewHub returns a hub that calls encode once per interval while at least one
// stream is open, and accepts at most maxStreams streams at once.
func NewHub(encode func() ([]byte, error), interval time.Duration, maxStreams int) *Hub {
	return &Hub{encode: encode, interval: interval, max: maxStreams, subs: map[*Stream]struct{}{}, stop: make(chan struct{})}
}

// Subscribe opens a stream. Its first frame comes at once: the newest frame
// if one is fresh, else one computed for it.
func (h *Hub) Subscribe() (*Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if len(h.subs) >= h.max {
		h.refused.Add(1)
		return nil, ErrTooManyStreams
	}
	s := &Stream{h: h, frames: make(chan []byte, 1)}
	h.subs[s] = struct{}{}
	h.opened.Add(1)
	if h.running && h.last != nil {
		s.frames <- h.last
	}
	if !h.running {
		h.running = true
		go h.run()
	}
	return s, nil
}

// Frames delivers the stream's frames; it is closed when the hub closes.
func (s *Stream) Frames() <-chan []byte { return s.frames }

// Close ends the stream; the hub stops computing when no stream is left.
func (s *Stream) Close() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// Close ends every stream and refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.stop)
	for s := range h.subs {
		close(s.frames)
		delete(h.subs, s)
	}
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	return Stats{Streams: n, MaxStreams: h.max, Opened: h.opened.Load(), Refused: h.refused.Load(),
		Snapshots: h.snapshots.Load(), Skipped: h.skipped.Load()}
}

// run computes and broadcasts until no stream is open (or the hub closes).
// The snapshot is computed outside the lock: subscribing never waits for it.
func (h *Hub) run() {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		frame, err := h.encode()
		h.snapshots.Add(1)
		h.mu.Lock()
		if h.closed || len(h.subs) == 0 {
			h.running, h.last = false, nil
			h.mu.Unlock()
			return
		}
		if err == nil {
			h.last = frame
			for s := range h.subs {
				select {
				case s.frames <- frame:
				default: // the reader is behind: replace its frame with this one
					select {
					case <-s.frames:
						h.skipped.Add(1)
					default:
					}
					s.frames <- frame
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-t.C:
		case <-h.stop:
		}
	}
}
