package mdns

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	hmdns "github.com/hashicorp/mdns"
)

// TestBrowserRunRounds drives Run with a fake Query (no socket: the passive
// listener is off and the interface is only looked up): a peer that stops
// answering expires after ExpiryRounds rounds, the others stay, every change
// is signalled, and cancelling returns after the round in flight.
func TestBrowserRunRounds(t *testing.T) {
	cfg := testConfig()
	cfg.Interface = "lo"
	cfg.BrowseInterval = 150 * time.Millisecond
	cfg.BrowseTimeout = 100 * time.Millisecond
	cfg.ExpiryRounds = 2
	b, err := NewBrowser(cfg, Node{ID: "self", Cluster: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	b.passive = false
	var rounds atomic.Int64
	b.query = func(_ context.Context, p *hmdns.QueryParam) error {
		if p.Service != "_edgeq._tcp" || p.Domain != "local" || !p.DisableIPv6 || p.Interface == nil || p.Interface.Name != "lo" || p.Timeout != cfg.BrowseTimeout {
			t.Errorf("query params %+v", p)
		}
		r := rounds.Add(1)
		send := func(id string) {
			n := peerNode(id, 1)
			e := &hmdns.ServiceEntry{Name: inst(id), Port: n.PeerPort, AddrV4: n.Addrs[0], InfoFields: n.txt()}
			p.Entries <- e
			// hashicorp keeps writing to an entry it has sent; the browser
			// must not read it before Query returns (-race checks this).
			e.InfoFields = n.txt()
		}
		send("b")
		if r <= 2 {
			send("a")
		}
		time.Sleep(p.Timeout)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	waitUpdate := func(want ...string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case <-b.Updates():
				if got := ids(b.Peers()); slices.Equal(got, want) {
					return
				}
			case <-deadline:
				t.Fatalf("peers %v, want %v (round %d)", ids(b.Peers()), want, rounds.Load())
			}
		}
	}
	waitUpdate("a", "b")
	waitUpdate("b") // a, last seen in round 2, expires at the end of round 4
	if r := rounds.Load(); r < 4 {
		t.Errorf("a expired after %d rounds, want 4", r)
	}
	if err := b.Run(ctx); err == nil {
		t.Error("a second Run while running succeeded")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestBrowserRunNeedsTheInterface(t *testing.T) {
	cfg := testConfig()
	cfg.Interface = "no-such-if0"
	b, err := NewBrowser(cfg, Node{ID: "self", Cluster: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(context.Background()); err == nil {
		t.Fatal("Run on a missing interface succeeded")
	}
}

func TestResponderLifecycleWithoutNetwork(t *testing.T) {
	cfg := testConfig()
	cfg.Interface = "no-such-if0"
	r, err := NewResponder(cfg, testNode())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err == nil {
		t.Fatal("Start on a missing interface succeeded")
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop of a responder that never started: %v", err)
	}
	if err := r.Start(); !errors.Is(err, ErrState) {
		t.Fatalf("Start after Stop: %v, want ErrState", err)
	}
	// The caller's addresses are copied.
	n := testNode()
	r, _ = NewResponder(testConfig(), n)
	n.Addrs[0][len(n.Addrs[0])-1] = 99
	if got := r.Node().Addrs[0].String(); got != "10.0.0.7" {
		t.Errorf("NewResponder keeps the caller's address slice: %s", got)
	}
}
