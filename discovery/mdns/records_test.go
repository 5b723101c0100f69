package mdns

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestAnnouncementRecords(t *testing.T) {
	rs := mustRecordSet(t, testConfig(), testNode())
	m := wire(t, rs.announcement())
	if !m.Response || !m.Authoritative || m.Id != 0 || len(m.Question) != 0 {
		t.Fatalf("header: response=%v aa=%v id=%d questions=%d", m.Response, m.Authoritative, m.Id, len(m.Question))
	}
	if got, want := types(m.Answer), []string{"PTR", "PTR", "SRV", "A", "TXT"}; !slices.Equal(got, want) {
		t.Fatalf("answer types %v, want %v", got, want)
	}
	for _, rr := range m.Answer {
		h := rr.Header()
		if h.Ttl != 10 {
			t.Errorf("%v: ttl %d, want 10", rr, h.Ttl)
		}
		flush := h.Class&cacheFlush != 0
		if want := h.Rrtype != dns.TypePTR; flush != want {
			t.Errorf("%v: cache-flush %v, want %v (unique records only)", rr, flush, want)
		}
		if h.Class&^cacheFlush != dns.ClassINET {
			t.Errorf("%v: class %d", rr, h.Class)
		}
	}
	enum, ptr := m.Answer[0].(*dns.PTR), m.Answer[1].(*dns.PTR)
	if enum.Hdr.Name != "_services._dns-sd._udp.local." || enum.Ptr != "_edgeq._tcp.local." {
		t.Errorf("enumeration PTR %v", enum)
	}
	if ptr.Hdr.Name != "_edgeq._tcp.local." || ptr.Ptr != "gw-1._edgeq._tcp.local." {
		t.Errorf("service PTR %v", ptr)
	}
	srv := m.Answer[2].(*dns.SRV)
	if srv.Hdr.Name != "gw-1._edgeq._tcp.local." || srv.Target != "gw-1.local." || srv.Port != 7400 {
		t.Errorf("SRV %v", srv)
	}
	if a := m.Answer[3].(*dns.A); a.Hdr.Name != "gw-1.local." || !a.A.Equal(net.IPv4(10, 0, 0, 7)) {
		t.Errorf("A %v", a)
	}
	txt := m.Answer[4].(*dns.TXT)
	want := []string{"txtvers=1", "id=gw-1", "cluster=alpha", "priority=5", "version=1.2.3", "port=7400"}
	if !slices.Equal(txt.Txt, want) {
		t.Errorf("TXT %q, want %q", txt.Txt, want)
	}
}

func TestGoodbyeHasTTLZeroAndKeepsSharedEnumeration(t *testing.T) {
	rs := mustRecordSet(t, testConfig(), testNode())
	m := wire(t, rs.goodbye())
	if got, want := types(m.Answer), []string{"PTR", "SRV", "A", "TXT"}; !slices.Equal(got, want) {
		t.Fatalf("goodbye types %v, want %v", got, want)
	}
	for _, rr := range m.Answer {
		if rr.Header().Ttl != 0 {
			t.Errorf("%v: goodbye ttl %d, want 0", rr, rr.Header().Ttl)
		}
		if strings.HasPrefix(rr.Header().Name, "_services.") {
			t.Errorf("goodbye for the shared enumeration record %v", rr)
		}
	}
	// The goodbye did not change the live records.
	for _, rr := range rs.announcement().Answer {
		if rr.Header().Ttl != 10 {
			t.Fatalf("announcement after goodbye: %v", rr)
		}
	}
}

func TestConfiguredTTL(t *testing.T) {
	cfg := testConfig()
	cfg.TTL = 120 * time.Second
	rs := mustRecordSet(t, cfg, testNode())
	for _, rr := range rs.announcement().Answer {
		if rr.Header().Ttl != 120 {
			t.Errorf("%v: ttl %d, want 120", rr, rr.Header().Ttl)
		}
	}
}

func TestLookup(t *testing.T) {
	rs := mustRecordSet(t, testConfig(), testNode())
	cases := []struct {
		name       string
		q          dns.Question
		answers    []string
		additional []string
	}{
		{"service PTR brings SRV, TXT, A and the host NSEC", question("_edgeq._tcp.local.", dns.TypePTR, false),
			[]string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"names match case-insensitively", question("_EDGEQ._TCP.Local.", dns.TypePTR, false),
			[]string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"service ANY", question("_edgeq._tcp.local.", dns.TypeANY, false),
			[]string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"enumeration", question("_services._dns-sd._udp.local.", dns.TypePTR, false), []string{"PTR"}, nil},
		{"SRV brings the address", question("gw-1._edgeq._tcp.local.", dns.TypeSRV, false),
			[]string{"SRV"}, []string{"A", "NSEC"}},
		{"TXT", question("gw-1._edgeq._tcp.local.", dns.TypeTXT, false), []string{"TXT"}, nil},
		{"instance ANY", question("gw-1._edgeq._tcp.local.", dns.TypeANY, false),
			[]string{"SRV", "TXT"}, []string{"A", "NSEC"}},
		{"host A", question("GW-1.local.", dns.TypeA, false), []string{"A"}, []string{"NSEC"}},
		{"host ANY", question("gw-1.local.", dns.TypeANY, false), []string{"A"}, []string{"NSEC"}},
		{"host AAAA without IPv6 is an NSEC", question("gw-1.local.", dns.TypeAAAA, false), []string{"NSEC"}, nil},
		{"PTR on the instance is an NSEC", question("gw-1._edgeq._tcp.local.", dns.TypePTR, false), []string{"NSEC"}, nil},
		{"unknown name", question("gw-2.local.", dns.TypeA, false), nil, nil},
		{"other service", question("_http._tcp.local.", dns.TypePTR, false), nil, nil},
		{"SRV on the shared service name", question("_edgeq._tcp.local.", dns.TypeSRV, false), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ans, add := rs.lookup(tc.q)
			if got := types(ans); !slices.Equal(got, tc.answers) {
				t.Errorf("answers %v, want %v", got, tc.answers)
			}
			if got := types(add); !slices.Equal(got, tc.additional) {
				t.Errorf("additional %v, want %v", got, tc.additional)
			}
		})
	}
	ans, _ := rs.lookup(question("gw-1.local.", dns.TypeAAAA, false))
	nsec := ans[0].(*dns.NSEC)
	if !slices.Equal(nsec.TypeBitMap, []uint16{dns.TypeA}) || nsec.Hdr.Class != dns.ClassINET|cacheFlush || nsec.NextDomain != "gw-1.local." {
		t.Errorf("host NSEC %v", nsec)
	}
}

func TestLabelsOfAwkwardIDs(t *testing.T) {
	long := strings.Repeat("a", 60) + strings.Repeat("b", 68) // 128 bytes
	for _, id := range []string{"a@b:c_d", long, "UPPER_case", "x"} {
		t.Run(id[:min(len(id), 10)], func(t *testing.T) {
			n := testNode()
			n.ID = id
			if err := n.Validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if hl := hostLabel(id); len(hl) > 63 || !isLDH(hl) {
				t.Errorf("host label %q is not a valid host name label", hl)
			}
			rs := mustRecordSet(t, testConfig(), n)
			h := parseResponse(wire(t, rs.announcement()), "_edgeq._tcp.local.")
			if len(h.alive) != 1 || h.alive[0].err != nil {
				t.Fatalf("parsed %+v", h)
			}
			got := h.alive[0]
			if !sameNode(got.node, n) {
				t.Errorf("node round trip %+v, want %+v", got.node, n)
			}
			// The name on the wire is the one the peer table expects.
			tbl := newPeerTable(testConfig(), Node{ID: "other", Cluster: "alpha"})
			if _, err := tbl.observe(got.instance, got.node, viaMulticast, t0); err != nil {
				t.Errorf("observe %q: %v", got.instance, err)
			}
		})
	}
	if hostLabel("a_b") == hostLabel("a:b") {
		t.Error("distinct IDs share a host label")
	}
}

func TestTXTStringsFitAndParse(t *testing.T) {
	n := testNode()
	n.ID = strings.Repeat("i", maxIDLen)
	n.Cluster = strings.Repeat("c", maxClusterLen)
	n.Version = strings.Repeat("v", maxVersionLen)
	n.Priority = -2147483648
	for _, s := range n.txt() {
		if len(s) > 255 {
			t.Errorf("TXT string of %d bytes", len(s))
		}
	}
	got, err := parseTXT(n.txt())
	got.Addrs = n.Addrs
	if err != nil || !sameNode(got, n) {
		t.Fatalf("parseTXT: %+v, %v", got, err)
	}
	// Keys are case-insensitive, the first occurrence wins, unknown keys are ignored.
	got, err = parseTXT([]string{"ID=a", "id=b", "Cluster=c", "priority=1", "version=v", "port=9", "extra=1", "flag"})
	if err != nil || got.ID != "a" || got.Cluster != "c" || got.PeerPort != 9 {
		t.Fatalf("parseTXT: %+v, %v", got, err)
	}
	for _, bad := range [][]string{
		{"id=a", "cluster=c", "version=v", "port=9"},                   // no priority
		{"id=a", "cluster=c", "priority=1", "version=v", "port=0"},     // bad port
		{"id=a b", "cluster=c", "priority=1", "version=v", "port=9"},   // bad id
		{"id=a", "cluster=c", "priority=1", "version=", "port=9"},      // empty version
		{"id=a", "cluster=c", "priority=x", "version=v", "port=9"},     // bad priority
		{"id=a", "cluster=c", "priority=1", "version=v", "port=65536"}, // bad port
	} {
		if _, err := parseTXT(bad); err == nil {
			t.Errorf("parseTXT(%q) accepted", bad)
		}
	}
}

func TestRecordSetNeedsAnAddress(t *testing.T) {
	n := testNode()
	n.Addrs = nil
	if _, err := newRecordSet(testConfig(), n); err == nil {
		t.Error("no addresses accepted")
	}
	n.Addrs = []net.IP{net.ParseIP("fe80::1")}
	if _, err := newRecordSet(testConfig(), n); err == nil {
		t.Error("only a link-local IPv6 address accepted")
	}
	n.Addrs = []net.IP{net.ParseIP("fd00::7"), net.IPv4(10, 0, 0, 7)}
	rs := mustRecordSet(t, testConfig(), n)
	ans, add := rs.lookup(question("gw-1.local.", dns.TypeANY, false))
	if got := types(ans); !slices.Equal(got, []string{"A", "AAAA"}) || len(add) != 0 {
		t.Errorf("dual-stack host ANY: %v + %v", got, types(add))
	}
}
