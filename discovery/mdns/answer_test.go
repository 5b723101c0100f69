package mdns

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// newTestAnswerer returns an answerer whose random delays are the lowest
// possible plus the given offset.
func newTestAnswerer(t *testing.T, offset int64) *answerer {
	return newAnswerer(mustRecordSet(t, testConfig(), testNode()), onLink, func(n int64) int64 {
		if offset >= n {
			t.Fatalf("offset %d out of [0,%d)", offset, n)
		}
		return offset
	})
}

const servicePTR = "_edgeq._tcp.local."

func TestQMIsAnsweredByMulticast(t *testing.T) {
	a := newTestAnswerer(t, 0)
	out := a.handle(query{msg: queryMsg(77, question(servicePTR, dns.TypePTR, false)), src: peer5353, toGroup: true}, t0)
	if len(out) != 1 {
		t.Fatalf("%d replies, want 1", len(out))
	}
	r := out[0]
	if r.to != mdnsGroup {
		t.Errorf("sent to %v, want the group", r.to)
	}
	if r.delay != 20*time.Millisecond {
		t.Errorf("delay %v, want 20ms (shared PTR: 20-120ms)", r.delay)
	}
	m := wire(t, r.msg)
	if m.Id != 0 || len(m.Question) != 0 || !m.Response || !m.Authoritative {
		t.Errorf("multicast header: id=%d questions=%d", m.Id, len(m.Question))
	}
	if got := types(m.Answer); !slices.Equal(got, []string{"PTR"}) {
		t.Errorf("answers %v", got)
	}
	if got := types(m.Extra); !slices.Equal(got, []string{"SRV", "A", "TXT", "NSEC"}) {
		t.Errorf("additional %v", got)
	}
	if srv := byType(m.Extra, dns.TypeSRV)[0]; srv.Header().Class != dns.ClassINET|cacheFlush || srv.Header().Ttl != 10 {
		t.Errorf("SRV header %+v", srv.Header())
	}
}

func TestUniqueAnswersGoAtOnceAndDelaysAreRandom(t *testing.T) {
	a := newTestAnswerer(t, 0)
	out := a.handle(query{msg: queryMsg(0, question("gw-1._edgeq._tcp.local.", dns.TypeSRV, false)), src: peer5353, toGroup: true}, t0)
	if len(out) != 1 || out[0].delay != 0 || out[0].to != mdnsGroup {
		t.Fatalf("SRV: %+v, want one multicast reply without delay", out)
	}
	a = newTestAnswerer(t, int64(99*time.Millisecond))
	out = a.handle(query{msg: queryMsg(0, question(servicePTR, dns.TypePTR, false)), src: peer5353, toGroup: true}, t0)
	if len(out) != 1 || out[0].delay != 119*time.Millisecond {
		t.Fatalf("PTR: %+v, want a delay of 119ms", out)
	}
	a = newTestAnswerer(t, 0)
	m := queryMsg(0, question(servicePTR, dns.TypePTR, false))
	m.Truncated = true
	out = a.handle(query{msg: m, src: peer5353, toGroup: true}, t0)
	if len(out) != 1 || out[0].delay != 400*time.Millisecond {
		t.Fatalf("truncated: %+v, want a delay of 400ms", out)
	}
}

func TestLegacyQueryGetsAConventionalUnicastReply(t *testing.T) {
	cfg := testConfig()
	cfg.TTL = 120 * time.Second // legacy replies are capped at 10 s whatever this is
	a := newAnswerer(mustRecordSet(t, cfg, testNode()), onLink, func(int64) int64 { return 0 })
	q := queryMsg(0xbeef, question(servicePTR, dns.TypePTR, false))
	q.RecursionDesired = true
	out := a.handle(query{msg: q, src: peerOther, toGroup: true}, t0)
	if len(out) != 1 {
		t.Fatalf("%d replies, want 1", len(out))
	}
	r := out[0]
	if r.to != peerOther || r.delay != 0 {
		t.Errorf("to %v after %v, want %v at once", r.to, r.delay, peerOther)
	}
	m := wire(t, r.msg)
	if m.Id != 0xbeef || !m.RecursionDesired {
		t.Errorf("id %#x rd %v, want the query's", m.Id, m.RecursionDesired)
	}
	if len(m.Question) != 1 || m.Question[0] != q.Question[0] {
		t.Errorf("question %v, want it echoed", m.Question)
	}
	for _, rr := range append(m.Answer, m.Extra...) {
		if h := rr.Header(); h.Ttl != 10 || h.Class != dns.ClassINET {
			t.Errorf("%v: ttl %d class %#x, want 10 s and no cache-flush bit", rr, h.Ttl, h.Class)
		}
	}
	if got := types(append(m.Answer, m.Extra...)); !slices.Equal(got, []string{"PTR", "SRV", "A", "TXT", "NSEC"}) {
		t.Errorf("records %v", got)
	}
	// Legacy replies do not count as multicasts.
	if out := a.handle(query{msg: queryMsg(0, question(servicePTR, dns.TypePTR, false)), src: peer5353, toGroup: true}, t0); len(out) != 1 || out[0].to != mdnsGroup {
		t.Errorf("QM after a legacy reply: %+v", out)
	}
}

func TestQUIsUnicastWhenRecentlyMulticast(t *testing.T) {
	a := newTestAnswerer(t, 0)
	qu := func(now time.Time) []reply {
		return a.handle(query{msg: queryMsg(5, question(servicePTR, dns.TypePTR, true)), src: peer5353, toGroup: true}, now)
	}
	// Never multicast: RFC 6762 §5.4 multicasts it to refresh every cache.
	out := qu(t0)
	if len(out) != 1 || out[0].to != mdnsGroup {
		t.Fatalf("first QU: %+v, want a multicast", out)
	}
	// Multicast within a quarter of the TTL (2.5 s): unicast to the querier.
	out = qu(t0.Add(2 * time.Second))
	if len(out) != 1 || out[0].to != peer5353 || out[0].delay != 0 {
		t.Fatalf("QU: %+v, want one unicast reply to %v", out, peer5353)
	}
	m := wire(t, out[0].msg)
	if m.Id != 5 || len(m.Question) != 0 {
		t.Errorf("QU reply id %d questions %d: want the ID echoed and no question (RFC 6762 §6)", m.Id, len(m.Question))
	}
	if got := types(m.Answer); !slices.Equal(got, []string{"PTR"}) || len(m.Extra) != 4 {
		t.Errorf("QU reply %v + %v", got, types(m.Extra))
	}
	if srv := byType(m.Extra, dns.TypeSRV)[0]; srv.Header().Class&cacheFlush == 0 {
		t.Error("QU reply lost the cache-flush bit")
	}
	// Stale again (the announcement at t0 + 20ms is more than 2.5 s old).
	if out := qu(t0.Add(3 * time.Second)); len(out) != 1 || out[0].to != mdnsGroup {
		t.Fatalf("stale QU: %+v, want a multicast", out)
	}
}

func TestDirectUnicastQueryGetsUnicast(t *testing.T) {
	a := newTestAnswerer(t, 0)
	out := a.handle(query{msg: queryMsg(9, question("gw-1.local.", dns.TypeA, false)), src: peer5353, toGroup: false}, t0)
	if len(out) != 1 || out[0].to != peer5353 {
		t.Fatalf("%+v, want a unicast reply", out)
	}
}

func TestMixedQUAndQMGiveTwoReplies(t *testing.T) {
	a := newTestAnswerer(t, 0)
	a.announce(t0)
	now := t0.Add(1500 * time.Millisecond)
	out := a.handle(query{msg: queryMsg(0,
		question("gw-1._edgeq._tcp.local.", dns.TypeTXT, true), // QU, multicast 1.5 s ago: unicast
		question("gw-1.local.", dns.TypeA, false),              // QM: multicast
	), src: peer5353, toGroup: true}, now)
	if len(out) != 2 {
		t.Fatalf("%d replies, want 2", len(out))
	}
	if out[0].to != peer5353 || !slices.Equal(types(out[0].msg.Answer), []string{"TXT"}) {
		t.Errorf("unicast reply %v to %v", types(out[0].msg.Answer), out[0].to)
	}
	if out[1].to != mdnsGroup || !slices.Equal(types(out[1].msg.Answer), []string{"A"}) {
		t.Errorf("multicast reply %v to %v", types(out[1].msg.Answer), out[1].to)
	}
}

func TestKnownAnswerSuppression(t *testing.T) {
	rs := mustRecordSet(t, testConfig(), testNode())
	ptr, _ := rs.lookup(question(servicePTR, dns.TypePTR, false))
	srv, _ := rs.lookup(question("gw-1._edgeq._tcp.local.", dns.TypeSRV, false))
	known := func(rr dns.RR, ttl uint32) dns.RR {
		rr = dns.Copy(rr)
		rr.Header().Ttl = ttl
		rr.Header().Class = dns.ClassINET // known answers carry no cache-flush bit
		return rr
	}
	cases := []struct {
		name    string
		known   []dns.RR
		answers []string
		extra   []string
	}{
		{"no known answers", nil, []string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"known with half the TTL", []dns.RR{known(ptr[0], 5)}, nil, nil},
		{"known with less than half", []dns.RR{known(ptr[0], 4)}, []string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"another node's PTR", func() []dns.RR {
			other := known(ptr[0], 10).(*dns.PTR)
			other.Ptr = "gw-2._edgeq._tcp.local."
			return []dns.RR{other}
		}(), []string{"PTR"}, []string{"SRV", "A", "TXT", "NSEC"}},
		{"known additional is left out", []dns.RR{known(srv[0], 10)}, []string{"PTR"}, []string{"A", "TXT", "NSEC"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAnswerer(rs, onLink, func(int64) int64 { return 0 })
			q := queryMsg(0, question(servicePTR, dns.TypePTR, false))
			q.Answer = tc.known
			out := a.handle(query{msg: wire(t, q), src: peer5353, toGroup: true}, t0)
			if tc.answers == nil {
				if len(out) != 0 {
					t.Fatalf("replied %v although the querier knows the answer", out[0].msg)
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("%d replies", len(out))
			}
			if got := types(out[0].msg.Answer); !slices.Equal(got, tc.answers) {
				t.Errorf("answers %v, want %v", got, tc.answers)
			}
			if got := types(out[0].msg.Extra); !slices.Equal(got, tc.extra) {
				t.Errorf("additional %v, want %v", got, tc.extra)
			}
		})
	}
}

func TestMulticastRateLimit(t *testing.T) {
	a := newTestAnswerer(t, 0)
	qm := func(now time.Time) []reply {
		return a.handle(query{msg: queryMsg(0, question("gw-1.local.", dns.TypeA, false)), src: peer5353, toGroup: true}, now)
	}
	if out := qm(t0); len(out) != 1 {
		t.Fatalf("first QM: %d replies", len(out))
	}
	if out := qm(t0.Add(999 * time.Millisecond)); len(out) != 0 {
		t.Fatalf("QM 999ms later: %d replies, want none (one multicast per second)", len(out))
	}
	if out := qm(t0.Add(time.Second)); len(out) != 1 {
		t.Fatalf("QM 1s later: %d replies, want 1", len(out))
	}
	// The announcement counts as a multicast.
	a.announce(t0.Add(5 * time.Second))
	if out := qm(t0.Add(5500 * time.Millisecond)); len(out) != 0 {
		t.Fatalf("QM 500ms after an announcement: %d replies, want none", len(out))
	}
	// A probe is answered at once, rate limit or not (RFC 6762 §8.1).
	probe := queryMsg(0, question("gw-1.local.", dns.TypeANY, false))
	probe.Ns = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "gw-1.local.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 120}, A: []byte{10, 0, 0, 99}}}
	if out := a.handle(query{msg: probe, src: peer5353, toGroup: true}, t0.Add(5600*time.Millisecond)); len(out) != 1 || out[0].delay != 0 {
		t.Fatalf("probe: %+v, want an immediate answer", out)
	}
	// A legacy query is not rate limited.
	if out := a.handle(query{msg: queryMsg(1, question("gw-1.local.", dns.TypeA, false)), src: peerOther, toGroup: true}, t0.Add(5700*time.Millisecond)); len(out) != 1 {
		t.Fatalf("legacy: %d replies", len(out))
	}
}

func TestIgnored(t *testing.T) {
	rs := mustRecordSet(t, testConfig(), testNode())
	ptrQ := func() *dns.Msg { return queryMsg(0, question(servicePTR, dns.TypePTR, false)) }
	cases := []struct {
		name string
		msg  *dns.Msg
		src  netip.AddrPort
	}{
		{"response", func() *dns.Msg { m := ptrQ(); m.Response = true; return m }(), peer5353},
		{"announcement", rs.announcement(), peer5353},
		{"opcode not QUERY", func() *dns.Msg { m := ptrQ(); m.Opcode = dns.OpcodeUpdate; return m }(), peer5353},
		{"rcode not zero", func() *dns.Msg { m := ptrQ(); m.Rcode = dns.RcodeServerFailure; return m }(), peer5353},
		{"off-link source", ptrQ(), netip.MustParseAddrPort("192.0.2.1:5353")},
		{"off-link legacy source", ptrQ(), netip.MustParseAddrPort("192.0.2.1:40000")},
		{"class CHAOS", func() *dns.Msg { m := ptrQ(); m.Question[0].Qclass = dns.ClassCHAOS; return m }(), peer5353},
		{"unknown name", queryMsg(0, question("gw-2.local.", dns.TypeA, false)), peer5353},
		{"unknown name, legacy", queryMsg(3, question("gw-2._edgeq._tcp.local.", dns.TypeSRV, false)), peerOther},
		{"other service", queryMsg(0, question("_http._tcp.local.", dns.TypePTR, false)), peer5353},
		{"no question", queryMsg(0), peer5353},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAnswerer(rs, onLink, func(int64) int64 { return 0 })
			if out := a.handle(query{msg: tc.msg, src: tc.src, toGroup: true}, t0); len(out) != 0 {
				t.Fatalf("answered: %v", out[0].msg)
			}
		})
	}
	// Link-local senders and class ANY are fine.
	a := newAnswerer(rs, onLink, func(int64) int64 { return 0 })
	m := queryMsg(0, question(servicePTR, dns.TypePTR, false))
	m.Question[0].Qclass = dns.ClassANY
	if out := a.handle(query{msg: m, src: netip.MustParseAddrPort("169.254.3.4:5353"), toGroup: true}, t0); len(out) != 1 {
		t.Fatalf("link-local sender, class ANY: %d replies", len(out))
	}
}

func TestAnnounceAndGoodbyeMessages(t *testing.T) {
	a := newTestAnswerer(t, 0)
	m := a.announce(t0)
	if len(m.Answer) != 5 {
		t.Fatalf("announcement has %d records", len(m.Answer))
	}
	for _, rr := range m.Answer {
		if got := a.lastMulticast[rrKey(rr)]; !got.Equal(t0) {
			t.Errorf("%v: last multicast %v, want %v", rr, got, t0)
		}
	}
}
