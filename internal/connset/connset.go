// Package connset keeps a TCP server's client connections: a bounded table
// of the live ones, a goroutine each, and a shutdown that waits for them.
// The NATS and NSQ front ends share it.
package connset

import (
	"context"
	"edgeq/internal/backoff"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Counts are a server's connection gauges, kept by its Set (a server's
// Stats embeds them).
type Counts struct {
	Connections      atomic.Int64  // open now
	TotalConnections atomic.Uint64 // accepted since start
}

// Set is the live connections of one server.
type Set[C any] struct {
	max    int
	counts *Counts
	mu     sync.Mutex
	conns  map[uint64]C // bound: max
	next   atomic.Uint64
	wg     sync.WaitGroup

	lnMu     sync.Mutex
	ln       net.Listener // set by Accept
	stopping bool         // StopAccepting was called; guarded by lnMu
}

// New returns a set of at most max connections that keeps counts.
func New[C any](max int, counts *Counts) *Set[C] {
	return &Set[C]{max: max, counts: counts, conns: map[uint64]C{}}
}

// Serve registers the connection newConn makes with a new ID and runs
// serve on a goroutine of its own; false, with nothing made, when max
// connections are open. serve's connection calls Remove when it ends.
func (s *Set[C]) Serve(newConn func(id uint64) C, serve func(C)) bool {
	s.mu.Lock()
	if len(s.conns) >= s.max {
		s.mu.Unlock()
		return false
	}
	id := s.next.Add(1)
	c := newConn(id)
	s.conns[id] = c
	s.mu.Unlock()
	s.counts.Connections.Add(1)
	s.counts.TotalConnections.Add(1)
	s.Go(func() { serve(c) })
	return true
}

// Remove forgets connection id.
func (s *Set[C]) Remove(id uint64) {
	s.mu.Lock()
	_, ok := s.conns[id]
	delete(s.conns, id)
	s.mu.Unlock()
	if ok {
		s.counts.Connections.Add(-1)
	}
}

// All returns the live connections.
func (s *Set[C]) All() []C {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]C, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	return out
}

// CloseAll stops accepting and calls close for every live connection (the
// start of a shutdown; Wait then waits for their goroutines).
func (s *Set[C]) CloseAll(close func(C)) {
	s.StopAccepting()
	for _, c := range s.All() {
		close(c)
	}
}

// Go runs f on a goroutine that Wait waits for (an accept loop).
func (s *Set[C]) Go(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Wait waits for every goroutine of Serve and Go, or until ctx ends.
func (s *Set[C]) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acceptRetry paces accepts after an error (out of file descriptors, say),
// as net/http's server does: 5 ms doubling up to 1 s, reset by a success.
var acceptRetry = backoff.Policy{Min: 5 * time.Millisecond, Max: time.Second}

// Accept serves ln on a goroutine Wait waits for, until StopAccepting:
// each connection gets its ID from Serve, refuse gets those over max, and an
// accept error is logged once per run of failures and retried, paced.
func (s *Set[C]) Accept(ln net.Listener, logger *slog.Logger,
	newConn func(id uint64, nc net.Conn) C, serve func(C), refuse func(nc net.Conn)) {
	s.lnMu.Lock()
	s.ln = ln
	stopped := s.stopping
	s.lnMu.Unlock()
	if stopped {
		_ = ln.Close()
		return
	}
	s.Go(func() {
		failures := 0
		for {
			nc, err := ln.Accept()
			if err != nil {
				if s.stopped() {
					return
				}
				if failures == 0 {
					logger.Warn("accept failed; retrying", "err", err)
				}
				time.Sleep(acceptRetry.Delay(failures, rand.Float64()))
				failures++
				continue
			}
			failures = 0
			if !s.Serve(func(id uint64) C { return newConn(id, nc) }, serve) {
				refuse(nc)
			}
		}
	})
}

// StopAccepting closes the listener Accept serves: no new connections.
// Safe to call more than once, and before Accept.
func (s *Set[C]) StopAccepting() {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if !s.stopping && s.ln != nil {
		_ = s.ln.Close()
	}
	s.stopping = true
}

func (s *Set[C]) stopped() bool {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	return s.stopping
}
