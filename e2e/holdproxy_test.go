package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// holdProxy relays TCP between the test's clients and a server on the
// loopback, and can hold the server's answers: bytes the server sends are
// not passed on until release, which also closes every relayed connection.
// So a server can take requests (a JetStream stores publishes) whose
// answers (pub-acks) the client never gets: a lost connection at the worst
// moment, made deterministic.
type holdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  bool
	cond  *sync.Cond
	conns []net.Conn
}

func newHoldProxy(t testing.TB, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.release()
	})
	return p
}

func (p *holdProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *holdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close(); c.Close() }()
		go p.pumpBack(c, s)
	}
}

// pumpBack copies the server's bytes to the client, waiting while held.
func (p *holdProxy) pumpBack(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold stops passing the server's bytes on.
func (p *holdProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// release closes every relayed connection (what was held is dropped) and
// relays new ones normally.
func (p *holdProxy) release() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.held = false
	p.cond.Broadcast()
	p.mu.Unlock()
}
