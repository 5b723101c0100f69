package mdns

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func testConfig() Config {
	c := DefaultConfig()
	c.Interface = "eth0"
	return c
}

func testNode() Node {
	return Node{ID: "gw-1", Cluster: "alpha", Priority: 5, Version: "1.2.3", PeerPort: 7400,
		Addrs: []net.IP{net.IPv4(10, 0, 0, 7)}}
}

func mustRecordSet(t *testing.T, cfg Config, n Node) *recordSet {
	t.Helper()
	rs, err := newRecordSet(cfg, n)
	if err != nil {
		t.Fatalf("newRecordSet: %v", err)
	}
	return rs
}

// question builds a question; qu sets the unicast-response bit.
func question(name string, qtype uint16, qu bool) dns.Question {
	q := dns.Question{Name: name, Qtype: qtype, Qclass: dns.ClassINET}
	if qu {
		q.Qclass |= unicastResponse
	}
	return q
}

func queryMsg(id uint16, qs ...dns.Question) *dns.Msg {
	m := new(dns.Msg)
	m.Id = id
	m.Question = qs
	return m
}

// wire packs and unpacks m, as a peer would see it.
func wire(t *testing.T, m *dns.Msg) *dns.Msg {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	out := new(dns.Msg)
	if err := out.Unpack(b); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	return out
}

var (
	t0        = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	peer5353  = netip.MustParseAddrPort("10.0.0.9:5353")
	peerOther = netip.MustParseAddrPort("10.0.0.9:40001")
	onLink    = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
)

// byType returns the records of type t in rrs.
func byType(rrs []dns.RR, t uint16) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype == t {
			out = append(out, rr)
		}
	}
	return out
}

func types(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, dns.TypeToString[rr.Header().Rrtype])
	}
	return out
}
