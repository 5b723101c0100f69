package mdns

import (
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

const (
	mdnsPort = 5353
	// minMulticastGap is the least time between two multicasts of one record
	// (RFC 6762 §6), probe answers excepted.
	minMulticastGap = time.Second
)

// mdnsGroup is the IPv4 mDNS group and port.
var mdnsGroup = netip.AddrPortFrom(netip.AddrFrom4([4]byte{224, 0, 0, 251}), mdnsPort)

// linkLocal4 is 169.254.0.0/16, always on-link (RFC 3927).
var linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")

// query is one received packet, as the socket adapter sees it.
type query struct {
	msg *dns.Msg
	src netip.AddrPort
	// toGroup is true when the packet was sent to 224.0.0.251, false for a
	// direct unicast query to our address (RFC 6762 §5.5).
	toGroup bool
}

// reply is a message to send: to the mDNS group or by unicast, after delay.
type reply struct {
	to    netip.AddrPort
	msg   *dns.Msg
	delay time.Duration
}

// answerer decides what a Responder sends. It holds the records and the time
// each was last multicast, never touches a socket or a clock, and is not safe
// for concurrent use.
type answerer struct {
	rs *recordSet
	// links are the on-link prefixes of the interface; packets from other
	// sources are ignored (RFC 6762 §11). Empty: accept every source.
	links []netip.Prefix
	// rand returns a uniform value in [0, n); it picks response delays.
	rand func(n int64) int64
	// lastMulticast is when each record (by key) was last multicast.
	lastMulticast map[string]time.Time
}

func newAnswerer(rs *recordSet, links []netip.Prefix, rand func(int64) int64) *answerer {
	return &answerer{rs: rs, links: links, rand: rand, lastMulticast: map[string]time.Time{}}
}

// handle returns what to send for one received packet: nothing, a multicast
// response, a unicast response, or both (a packet can mix QM and QU
// questions). Rules, in order:
//   - responses, opcodes other than QUERY, non-zero rcodes, sources off the
//     link and classes other than IN/ANY are ignored; names we do not own
//     are not answered;
//   - a known answer with at least half our TTL is not repeated (§7.1);
//   - legacy queries (source port ≠ 5353) get one conventional unicast reply
//     to the source: ID and questions echoed, TTL ≤ 10 s, no cache-flush
//     bits (§6.7);
//   - a direct unicast query to port 5353 gets a unicast reply (§5.5);
//   - a QU question gets a unicast reply, but a record not multicast within a
//     quarter of its TTL is multicast instead (§5.4);
//   - a QM question gets a multicast reply with ID 0 and no question. A
//     record multicast less than 1 s ago is left out (§6) unless the query
//     is a probe; the reply waits 20–120 ms when it holds a shared record
//     (the PTR), 400–500 ms when the query is truncated, else none (§6).
func (a *answerer) handle(q query, now time.Time) []reply {
	m := q.msg
	if m == nil || m.Response || m.Opcode != dns.OpcodeQuery || m.Rcode != dns.RcodeSuccess || !a.onLink(q.src.Addr()) {
		return nil
	}
	legacy := q.src.Port() != mdnsPort
	probe := len(m.Ns) > 0
	var mcast, ucast section
	for _, question := range m.Question {
		if class := question.Qclass &^ unicastResponse; class != dns.ClassINET && class != dns.ClassANY {
			continue
		}
		answers, additional := a.rs.lookup(question)
		answers = suppressKnown(answers, m.Answer)
		if len(answers) == 0 {
			continue
		}
		additional = suppressKnown(additional, m.Answer)
		switch {
		case legacy || !q.toGroup:
			ucast.add(answers, additional)
		case question.Qclass&unicastResponse != 0:
			var toGroup []dns.RR
			for _, rr := range answers {
				if now.Sub(a.lastMulticast[rrKey(rr)]) < time.Duration(rr.Header().Ttl)*time.Second/4 {
					ucast.add([]dns.RR{rr}, nil)
				} else {
					toGroup = append(toGroup, rr)
				}
			}
			if len(toGroup) > 0 {
				mcast.add(toGroup, additional)
			} else {
				ucast.add(nil, additional)
			}
		default:
			mcast.add(answers, additional)
		}
	}
	var out []reply
	if len(ucast.answers) > 0 {
		if legacy {
			r := response(m.Id, legacyRecords(ucast.answers), legacyRecords(ucast.extra()))
			r.Question = append([]dns.Question(nil), m.Question...)
			r.RecursionDesired = m.RecursionDesired
			out = append(out, reply{to: q.src, msg: r})
		} else {
			out = append(out, reply{to: q.src, msg: response(m.Id, ucast.answers, ucast.extra())})
		}
	}
	if r, ok := a.multicast(mcast, probe, m.Truncated, now); ok {
		out = append(out, r)
	}
	return out
}

// multicast applies the rate limit and the delay rules to a multicast
// section and notes when its records go out.
func (a *answerer) multicast(s section, probe, truncated bool, now time.Time) (reply, bool) {
	var answers []dns.RR
	shared := false
	for _, rr := range s.answers {
		if !probe && now.Sub(a.lastMulticast[rrKey(rr)]) < minMulticastGap {
			continue
		}
		answers = append(answers, rr)
		shared = shared || rr.Header().Rrtype == dns.TypePTR
	}
	if len(answers) == 0 {
		return reply{}, false
	}
	s.answers = answers
	var delay time.Duration
	switch {
	case probe:
	case truncated:
		delay = 400*time.Millisecond + time.Duration(a.rand(int64(100*time.Millisecond)))
	case shared:
		delay = 20*time.Millisecond + time.Duration(a.rand(int64(100*time.Millisecond)))
	}
	extra := s.extra()
	a.noteMulticast(now.Add(delay), answers, extra)
	return reply{to: mdnsGroup, msg: response(0, answers, extra), delay: delay}, true
}

// announce returns the announcement and notes its records as multicast now.
func (a *answerer) announce(now time.Time) *dns.Msg {
	m := a.rs.announcement()
	a.noteMulticast(now, m.Answer)
	return m
}

func (a *answerer) noteMulticast(at time.Time, sets ...[]dns.RR) {
	for _, set := range sets {
		for _, rr := range set {
			a.lastMulticast[rrKey(rr)] = at
		}
	}
}

func (a *answerer) onLink(ip netip.Addr) bool {
	if len(a.links) == 0 {
		return true
	}
	ip = ip.Unmap()
	if linkLocal4.Contains(ip) {
		return true
	}
	for _, p := range a.links {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// section collects the answers and additional records of one reply,
// without duplicates.
type section struct {
	answers, additional []dns.RR
}

func (s *section) add(answers, additional []dns.RR) {
	for _, rr := range answers {
		if !containsRR(s.answers, rr) {
			s.answers = append(s.answers, rr)
		}
	}
	for _, rr := range additional {
		if !containsRR(s.additional, rr) {
			s.additional = append(s.additional, rr)
		}
	}
}

// extra returns the additional records that are not already answers.
func (s *section) extra() []dns.RR {
	var out []dns.RR
	for _, rr := range s.additional {
		if !containsRR(s.answers, rr) {
			out = append(out, rr)
		}
	}
	return out
}

// suppressKnown drops the records the querier listed as known answers with
// at least half our TTL (RFC 6762 §7.1).
func suppressKnown(rrs, known []dns.RR) []dns.RR {
	if len(known) == 0 {
		return rrs
	}
	var out []dns.RR
	for _, rr := range rrs {
		suppressed := false
		for _, k := range known {
			if sameRecord(rr, k) && k.Header().Ttl >= rr.Header().Ttl/2 {
				suppressed = true
				break
			}
		}
		if !suppressed {
			out = append(out, rr)
		}
	}
	return out
}

func containsRR(set []dns.RR, rr dns.RR) bool {
	for _, x := range set {
		if sameRecord(x, rr) {
			return true
		}
	}
	return false
}

// sameRecord compares name (case-insensitively), type, class without the
// cache-flush bit, and data; not the TTL.
func sameRecord(a, b dns.RR) bool {
	return rrKey(a) == rrKey(b)
}

// rrKey identifies a record by name, type, class and data.
func rrKey(rr dns.RR) string {
	c := dns.Copy(rr)
	h := c.Header()
	h.Ttl = 0
	h.Class &^= cacheFlush
	h.Name = strings.ToLower(h.Name)
	return c.String()
}
