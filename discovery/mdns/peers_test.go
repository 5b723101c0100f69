package mdns

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	hmdns "github.com/hashicorp/mdns"
	"github.com/miekg/dns"
)

func peerNode(id string, ip byte) Node {
	return Node{ID: id, Cluster: "alpha", Priority: 1, Version: "1.0", PeerPort: 7400,
		Addrs: []net.IP{net.IPv4(10, 0, 0, ip).To4()}}
}

func inst(id string) string { return instanceLabel(id) + "._edgeq._tcp.local." }

func ids(ps []Peer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}

func newTestTable(rounds int, static ...string) *peerTable {
	cfg := testConfig()
	cfg.ExpiryRounds = rounds
	cfg.StaticPeers = static
	return newPeerTable(cfg, Node{ID: "self", Cluster: "alpha"})
}

func TestPeerExpiryCountsRounds(t *testing.T) {
	tbl := newTestTable(3)
	tbl.beginRound() // round 1
	if changed, err := tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0); !changed || err != nil {
		t.Fatalf("observe a: %v %v", changed, err)
	}
	tbl.observe(inst("b"), peerNode("b", 2), viaQuery, t0)
	if exp := tbl.endRound(); len(exp) != 0 {
		t.Fatalf("expired %v in the round they were seen", exp)
	}
	// b keeps answering, a falls silent.
	for round := 2; round <= 4; round++ {
		tbl.beginRound()
		now := t0.Add(time.Duration(round) * 10 * time.Second)
		if changed, err := tbl.observe(inst("b"), peerNode("b", 2), viaQuery, now); changed || err != nil {
			t.Fatalf("refresh of b: changed=%v err=%v, want an unchanged refresh", changed, err)
		}
		exp := tbl.endRound()
		switch {
		case round < 4 && len(exp) != 0:
			t.Fatalf("round %d expired %v; a was seen %d rounds ago", round, exp, round-1)
		case round == 4 && !slices.Equal(exp, []string{"a"}):
			t.Fatalf("round 4 expired %v, want [a] (not seen for 3 rounds)", exp)
		}
	}
	ps := tbl.list()
	if !slices.Equal(ids(ps), []string{"b"}) || !ps[0].LastSeen.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("peers %+v", ps)
	}
	// A passive sighting between rounds counts for the current round.
	tbl.observe(inst("a"), peerNode("a", 1), viaMulticast, t0.Add(45*time.Second))
	tbl.beginRound()
	tbl.beginRound()
	if exp := tbl.endRound(); len(exp) != 0 {
		t.Fatalf("expired %v early", exp)
	}
	tbl.beginRound()
	if exp := tbl.endRound(); !slices.Equal(exp, []string{"a", "b"}) {
		t.Fatalf("expired %v, want [a b]", exp)
	}
}

func TestPeerChangesAreReported(t *testing.T) {
	tbl := newTestTable(3)
	tbl.beginRound()
	tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0)
	n := peerNode("a", 1)
	n.Priority = 9
	if changed, _ := tbl.observe(inst("a"), n, viaQuery, t0); !changed {
		t.Error("a priority change is not a change")
	}
	n.Addrs = []net.IP{net.IPv4(10, 0, 0, 3)}
	if changed, _ := tbl.observe(inst("a"), n, viaQuery, t0); !changed {
		t.Error("an address change is not a change")
	}
	if p := tbl.list()[0]; p.Dial != "10.0.0.3:7400" || p.Priority != 9 {
		t.Errorf("peer %+v", p)
	}
}

func TestSightingsThatAreNotPeers(t *testing.T) {
	tbl := newTestTable(3)
	tbl.beginRound()
	other := peerNode("b", 2)
	other.Cluster = "beta"
	noAddr := peerNode("c", 3)
	noAddr.Addrs = nil
	cases := []struct {
		name     string
		instance string
		node     Node
		want     error
	}{
		{"ourselves", inst("self"), peerNode("self", 9), errSelf},
		{"another cluster", inst("b"), other, errOtherCluster},
		{"instance name not matching the id", inst("x"), peerNode("c", 3), errNameMismatch},
		{"another service", "c._http._tcp.local.", peerNode("c", 3), errNotService},
		{"no address", inst("c"), noAddr, errNoAddress},
	}
	for _, tc := range cases {
		if _, err := tbl.observe(tc.instance, tc.node, viaQuery, t0); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if ps := tbl.list(); len(ps) != 0 {
		t.Fatalf("peers %v", ids(ps))
	}
	// Names are case-insensitive.
	if _, err := tbl.observe("C._EDGEQ._TCP.LOCAL.", peerNode("c", 3), viaQuery, t0); err != nil {
		t.Errorf("upper-case name: %v", err)
	}
}

func TestGoodbyeRemovesAtOnceAndBeatsStaleQueryEntries(t *testing.T) {
	tbl := newTestTable(30)
	tbl.beginRound()
	tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0)
	tbl.observe(inst("b"), peerNode("b", 2), viaQuery, t0)
	if id, ok := tbl.goodbye("A._edgeq._tcp.local."); !ok || id != "a" {
		t.Fatalf("goodbye: %q %v", id, ok)
	}
	if !slices.Equal(ids(tbl.list()), []string{"b"}) {
		t.Fatalf("peers after goodbye %v", ids(tbl.list()))
	}
	if _, ok := tbl.goodbye(inst("a")); ok {
		t.Error("second goodbye removed something")
	}
	// hashicorp's Query reports the goodbye packet it heard as a live entry.
	if _, err := tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0); !errors.Is(err, errSaidGoodbye) {
		t.Fatalf("query entry in the goodbye's round: %v", err)
	}
	// In the next round a query sighting counts again (the node restarted).
	tbl.endRound()
	tbl.beginRound()
	if changed, err := tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0); !changed || err != nil {
		t.Fatalf("query entry a round later: %v %v", changed, err)
	}
	// An announcement (a multicast with a TTL) counts at once.
	tbl.goodbye(inst("a"))
	if changed, err := tbl.observe(inst("a"), peerNode("a", 1), viaMulticast, t0); !changed || err != nil {
		t.Fatalf("announcement after goodbye: %v %v", changed, err)
	}
}

func TestStaticPeersAreMerged(t *testing.T) {
	tbl := newTestTable(3, "10.0.0.2:7400", "gw-far.example:7400", "10.0.0.1:9999")
	ps := tbl.list()
	if len(ps) != 3 || !ps[0].Static || !ps[0].LastSeen.IsZero() || ps[0].ID != "" {
		t.Fatalf("static peers before discovery: %+v", ps)
	}
	tbl.beginRound()
	tbl.observe(inst("a"), peerNode("a", 1), viaQuery, t0) // 10.0.0.1:7400: not the static 10.0.0.1:9999
	tbl.observe(inst("b"), peerNode("b", 2), viaQuery, t0) // 10.0.0.2:7400: the static one
	ps = tbl.list()
	type row struct {
		id, dial string
		static   bool
	}
	var got []row
	for _, p := range ps {
		got = append(got, row{p.ID, p.Dial, p.Static})
	}
	want := []row{
		{"", "10.0.0.1:9999", true},
		{"", "gw-far.example:7400", true},
		{"a", "10.0.0.1:7400", false},
		{"b", "10.0.0.2:7400", true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("peers\n got %+v\nwant %+v", got, want)
	}
	// list returns copies.
	ps[2].Addrs[0][3] = 99
	if tbl.list()[2].Addrs[0][3] != 1 {
		t.Error("list shares the table's addresses")
	}
}

func TestPassiveParsing(t *testing.T) {
	a := mustRecordSet(t, testConfig(), peerNode("a", 1))
	b := mustRecordSet(t, testConfig(), peerNode("b", 2))
	// An announcement.
	h := parseResponse(wire(t, a.announcement()), "_edgeq._tcp.local.")
	if len(h.alive) != 1 || len(h.gone) != 0 || !sameNode(h.alive[0].node, peerNode("a", 1)) || h.alive[0].instance != inst("a") {
		t.Fatalf("announcement: %+v", h)
	}
	// A goodbye.
	h = parseResponse(wire(t, a.goodbye()), "_edgeq._tcp.local.")
	if len(h.alive) != 0 || !slices.Equal(h.gone, []string{inst("a")}) {
		t.Fatalf("goodbye: %+v", h)
	}
	// Two answers in one packet (a multicast answer to a PTR query, merged).
	m := b.announcement()
	m.Answer = append(m.Answer, a.announcement().Answer...)
	h = parseResponse(wire(t, m), "_edgeq._tcp.local.")
	if len(h.alive) != 2 {
		t.Fatalf("two instances: %+v", h)
	}
	// An answer to a PTR query: PTR in the answers, the rest additional.
	ans, add := a.lookup(question(servicePTR, dns.TypePTR, false))
	h = parseResponse(wire(t, response(0, ans, add)), "_edgeq._tcp.local.")
	if len(h.alive) != 1 || h.alive[0].err != nil {
		t.Fatalf("PTR answer: %+v", h)
	}
	// Incomplete: no address.
	ans, _ = a.lookup(question(servicePTR, dns.TypePTR, false))
	h = parseResponse(wire(t, response(0, ans, byType(add, dns.TypeSRV))), "_edgeq._tcp.local.")
	if len(h.alive) != 0 {
		t.Fatalf("incomplete answer reported: %+v", h)
	}
	// Another service, and a query, are ignored.
	h = parseResponse(wire(t, a.announcement()), "_other._tcp.local.")
	if len(h.alive)+len(h.gone) != 0 {
		t.Fatalf("other service: %+v", h)
	}
	if h := parseResponse(queryMsg(0, question(servicePTR, dns.TypePTR, false)), "_edgeq._tcp.local."); len(h.alive)+len(h.gone) != 0 {
		t.Fatalf("query: %+v", h)
	}
	// SRV port and TXT port must agree.
	m = a.announcement()
	byType(m.Answer, dns.TypeSRV)[0].(*dns.SRV).Port = 1
	if h := parseResponse(wire(t, m), "_edgeq._tcp.local."); len(h.alive) != 1 || !errors.Is(h.alive[0].err, errPortMismatch) {
		t.Fatalf("port mismatch: %+v", h)
	}
}

func TestQueryEntriesAreFiltered(t *testing.T) {
	cfg := testConfig()
	b, err := NewBrowser(cfg, Node{ID: "self", Cluster: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	b.table.beginRound()
	entry := func(id, cluster, name string, port int) *hmdns.ServiceEntry {
		n := peerNode(id, 1)
		n.Cluster = cluster
		return &hmdns.ServiceEntry{Name: name, Port: port, AddrV4: net.IPv4(10, 0, 0, 1), InfoFields: n.txt()}
	}
	b.fromQuery(entry("a", "alpha", inst("a"), 7400))
	b.fromQuery(entry("b", "beta", inst("b"), 7400))
	b.fromQuery(entry("c", "alpha", "c._http._tcp.local.", 7400))
	b.fromQuery(entry("d", "alpha", inst("d"), 7401))
	b.fromQuery(entry("self", "alpha", inst("self"), 7400))
	b.fromQuery(&hmdns.ServiceEntry{Name: inst("e"), Port: 7400, AddrV4: net.IPv4(10, 0, 0, 5), InfoFields: []string{"id=e"}})
	if got := ids(b.Peers()); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("peers %v, want [a]", got)
	}
	select {
	case <-b.Updates():
	default:
		t.Error("no update signalled")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := testConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if err := DefaultConfig().Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no interface: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"service without proto":    func(c *Config) { c.Service = "_edgeq" },
		"service with domain":      func(c *Config) { c.Service = "_edgeq._tcp.local." },
		"domain without dot":       func(c *Config) { c.Domain = "local" },
		"ttl zero":                 func(c *Config) { c.TTL = 0 },
		"ttl fraction":             func(c *Config) { c.TTL = 1500 * time.Millisecond },
		"ttl too long":             func(c *Config) { c.TTL = time.Hour },
		"timeout too short":        func(c *Config) { c.BrowseTimeout = time.Millisecond },
		"interval below timeout":   func(c *Config) { c.BrowseInterval = c.BrowseTimeout },
		"no expiry":                func(c *Config) { c.ExpiryRounds = 0 },
		"static peer no port":      func(c *Config) { c.StaticPeers = []string{"10.0.0.1"} },
		"static peer port 0":       func(c *Config) { c.StaticPeers = []string{"10.0.0.1:0"} },
		"static peer empty host":   func(c *Config) { c.StaticPeers = []string{":7400"} },
		"static peer bad port":     func(c *Config) { c.StaticPeers = []string{"h:x"} },
		"static peer port too big": func(c *Config) { c.StaticPeers = []string{"h:70000"} },
	} {
		c := testConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := testConfig()
	c.StaticPeers = []string{"[fd00::1]:7400", "gw.example:1"}
	c.Service, c.Domain = "_x-y._udp", "lan."
	if err := c.Validate(); err != nil {
		t.Errorf("valid variant: %v", err)
	}
}

func TestNodeValidate(t *testing.T) {
	if err := testNode().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Node){
		"empty id":        func(n *Node) { n.ID = "" },
		"id with dot":     func(n *Node) { n.ID = "a.b" },
		"id too long":     func(n *Node) { n.ID = string(make([]byte, 129)) },
		"empty cluster":   func(n *Node) { n.Cluster = "" },
		"cluster spaces":  func(n *Node) { n.Cluster = "a b" },
		"version spaces":  func(n *Node) { n.Version = "1 2" },
		"no version":      func(n *Node) { n.Version = "" },
		"port 0":          func(n *Node) { n.PeerPort = 0 },
		"multicast addr":  func(n *Node) { n.Addrs = []net.IP{net.IPv4(224, 0, 0, 251)} },
		"unspecified ip":  func(n *Node) { n.Addrs = []net.IP{net.IPv4zero} },
		"garbage address": func(n *Node) { n.Addrs = []net.IP{{1, 2}} },
	} {
		n := testNode()
		mut(&n)
		if err := n.Validate(); !errors.Is(err, ErrInvalidNode) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if strconv.IntSize == 64 {
		n := testNode()
		big := int64(1) << 31
		n.Priority = int(big)
		if err := n.Validate(); !errors.Is(err, ErrInvalidNode) {
			t.Errorf("priority 2^31: %v", err)
		}
	}
	if _, err := NewResponder(testConfig(), Node{ID: "x"}); !errors.Is(err, ErrInvalidNode) {
		t.Errorf("NewResponder with a bad node: %v", err)
	}
	if _, err := NewBrowser(testConfig(), Node{ID: "x"}); !errors.Is(err, ErrInvalidNode) {
		t.Errorf("NewBrowser without a cluster: %v", err)
	}
}
