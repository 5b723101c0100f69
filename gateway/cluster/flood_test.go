package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// TestPeerJoinsDuringSlowHandshakeFlood: a LAN host (127.0.0.2 here) keeps
// 200 connections trickling a HELLO at the cluster port, each reconnecting
// as soon as it is closed, so every pre-auth slot that frees is taken again
// at once. A real peer (from 127.0.0.1) that only it knows — so it must get
// through the flooded listener — still joins within twice the failure
// timeout, with the production dial interval.
func TestPeerJoinsDuringSlowHandshakeFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a 200-connection flood")
	}
	const failure = 3 * time.Second // the default failure timeout (and handshake deadline)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(id string, prio int, peers ...string) (*Manager, *recorder) {
		rec := newRecorder()
		m, err := NewManager(ManagerConfig{
			Identity: Identity{Cluster: "plant", Node: id, Secret: []byte(secret)}, Priority: prio,
			Listen: "127.0.0.1:0", Peers: peers, FailureTimeout: failure, Logger: quiet,
		}, rec)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); m.Wait() })
		return m, rec
	}
	a, _ := start("a", 1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
	frame := AppendFrame(nil, TypeHello, hello("plant", "intruder", make([]byte, nonceLen), nil))
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := d.Dial("tcp", a.Addr())
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				// One byte every 100 ms; the read doubles as the timer and
				// notices at once when the listener closes the connection.
				for i := 0; ; i++ {
					if i < len(frame) {
						if _, err := c.Write(frame[i : i+1]); err != nil {
							break
						}
					}
					_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					_, err := c.Read(make([]byte, 64))
					var ne net.Error
					if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
						break
					}
					select {
					case <-stop:
						c.Close()
						return
					default:
					}
				}
				c.Close()
			}
		}()
	}
	eventually(t, "the flood turned away at the listener", func() bool {
		c := a.Counters()
		return c.HandshakesBusy >= 200 && c.Handshaking > 0
	})
	begin := time.Now()
	_, brec := start("b", 2, a.Addr())
	eventually(t, "b joins a", func() bool { _, ok := brec.isUp("a"); return ok })
	took := time.Since(begin)
	c := a.Counters()
	t.Logf("joined after %v; a: %d in the handshake, %d closed busy, %d failed", took.Round(time.Millisecond),
		c.Handshaking, c.HandshakesBusy, c.HandshakeFailures)
	if took > 2*failure {
		t.Fatalf("b joined after %v, want within twice the failure timeout (%v)", took, 2*failure)
	}
}

func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.168.1.20:4248", "192.168.1.20"},
		{"[::ffff:192.168.1.20]:4248", "192.168.1.20"},
		{"[fd00:1:2:3:aaaa::1]:4248", "fd00:1:2:3::"},
		{"[fd00:1:2:3:bbbb::9]:1", "fd00:1:2:3::"},
		{"[fd00:1:2:4::1]:4248", "fd00:1:2:4::"},
	} {
		a, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := sourceOf(a); got != c.want {
			t.Errorf("%s: %s, want %s", c.addr, got, c.want)
		}
	}
}
