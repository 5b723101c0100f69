package mdns

import (
	"fmt"
	"net"
	"strings"

	hmdns "github.com/hashicorp/mdns"
	"github.com/miekg/dns"
)

const (
	// cacheFlush is the top bit of an RR class in a response (RFC 6762 §10.2).
	cacheFlush = 1 << 15
	// unicastResponse is the top bit of a question class (QU, RFC 6762 §5.4).
	unicastResponse = 1 << 15
	// legacyMaxTTL caps the TTLs of legacy unicast replies (RFC 6762 §6.7).
	legacyMaxTTL = 10
)

// recordSet holds one node's records and answers questions about them. The
// records themselves come from hashicorp's MDNSService; recordSet sets the
// TTLs and cache-flush bits, splits answers from additional records, matches
// names case-insensitively and adds NSEC negative answers.
type recordSet struct {
	svc      *hmdns.MDNSService
	ttl      uint32
	enum     string // _services._dns-sd._udp.<domain>
	service  string // _edgeq._tcp.<domain>
	instance string // <id>._edgeq._tcp.<domain>
	host     string // <id>.<domain>
	hasA     bool
	hasAAAA  bool
}

// newRecordSet builds the records of node n, whose Addrs must be set.
func newRecordSet(cfg Config, n Node) (*recordSet, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var ips []net.IP
	rs := &recordSet{ttl: uint32(cfg.TTL.Seconds())}
	for _, ip := range n.Addrs {
		switch {
		case ip.To4() != nil:
			ips = append(ips, ip.To4())
			rs.hasA = true
		case !ip.IsLinkLocalUnicast():
			ips = append(ips, ip)
			rs.hasAAAA = true
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("mdns: node %q: %w: no address to publish", n.ID, ErrInvalidNode)
	}
	rs.service = cfg.serviceName()
	rs.instance = instanceLabel(n.ID) + "." + rs.service
	rs.host = hostLabel(n.ID) + "." + cfg.Domain
	rs.enum = "_services._dns-sd._udp." + cfg.Domain
	svc, err := hmdns.NewMDNSService(instanceLabel(n.ID), cfg.Service, cfg.Domain, rs.host, n.PeerPort, ips, n.txt())
	if err != nil {
		return nil, fmt.Errorf("mdns: records of %q: %w", n.ID, err)
	}
	rs.svc = svc
	return rs, nil
}

// lookup returns the answers to q and the additional records that go with
// them (RFC 6763 §12), with our TTL and the cache-flush bit on unique
// records. Names match case-insensitively. A name that is not ours gives
// nothing; a type we lack on a name we own gives an NSEC (RFC 6762 §6.1).
func (rs *recordSet) lookup(q dns.Question) (answers, additional []dns.RR) {
	qt := q.Qtype
	var name string
	switch {
	case strings.EqualFold(q.Name, rs.enum):
		name = rs.enum
	case strings.EqualFold(q.Name, rs.service):
		name = rs.service
	case strings.EqualFold(q.Name, rs.instance):
		name = rs.instance
	case strings.EqualFold(q.Name, rs.host):
		name = rs.host
	default:
		return nil, nil
	}
	var recs []dns.RR
	if name == rs.host && qt == dns.TypeANY {
		// hashicorp answers only A and AAAA questions for the host name.
		recs = append(rs.svc.Records(dns.Question{Name: name, Qtype: dns.TypeA}),
			rs.svc.Records(dns.Question{Name: name, Qtype: dns.TypeAAAA})...)
	} else {
		recs = rs.svc.Records(dns.Question{Name: name, Qtype: qt, Qclass: dns.ClassINET})
	}
	for _, rr := range recs {
		rr = rs.finish(rr)
		h := rr.Header()
		if strings.EqualFold(h.Name, name) && (qt == dns.TypeANY || qt == h.Rrtype) {
			answers = append(answers, rr)
		} else {
			additional = append(additional, rr)
		}
	}
	if len(answers) == 0 && (name == rs.instance || name == rs.host) {
		// We own these names: say which types exist, so the querier
		// stops asking (for example for AAAA when IPv6 is off).
		answers = []dns.RR{rs.nsec(name)}
	}
	if len(answers) == 0 {
		return nil, nil
	}
	if rs.hasA != rs.hasAAAA && answers[0].Header().Rrtype != dns.TypeNSEC && hasAddress(answers, additional) {
		// An address record goes out, and the host lacks the other
		// family: assert that in the same packet (RFC 6762 §6.2).
		additional = append(additional, rs.nsec(rs.host))
	}
	return answers, additional
}

// nsec returns the NSEC record listing the types that exist at name.
func (rs *recordSet) nsec(name string) dns.RR {
	var types []uint16
	switch name {
	case rs.host:
		if rs.hasA {
			types = append(types, dns.TypeA)
		}
		if rs.hasAAAA {
			types = append(types, dns.TypeAAAA)
		}
	default:
		types = []uint16{dns.TypeTXT, dns.TypeSRV}
	}
	return &dns.NSEC{
		Hdr:        dns.RR_Header{Name: name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET | cacheFlush, Ttl: rs.ttl},
		NextDomain: name,
		TypeBitMap: types,
	}
}

func hasAddress(sets ...[]dns.RR) bool {
	for _, set := range sets {
		for _, rr := range set {
			if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
				return true
			}
		}
	}
	return false
}

// finish returns a copy of rr with our TTL and, for unique records (all but
// PTR), the cache-flush bit.
func (rs *recordSet) finish(rr dns.RR) dns.RR {
	rr = dns.Copy(rr)
	h := rr.Header()
	h.Ttl = rs.ttl
	h.Class = dns.ClassINET
	if h.Rrtype != dns.TypePTR {
		h.Class |= cacheFlush
	}
	return rr
}

// all returns every record we publish: the service-type enumeration PTR, the
// service PTR, SRV, TXT and addresses.
func (rs *recordSet) all() []dns.RR {
	recs := []dns.RR{}
	for _, q := range []dns.Question{{Name: rs.enum, Qtype: dns.TypePTR}, {Name: rs.service, Qtype: dns.TypePTR}} {
		ans, add := rs.lookup(q)
		recs = append(recs, ans...)
		for _, rr := range add {
			if rr.Header().Rrtype != dns.TypeNSEC {
				recs = append(recs, rr)
			}
		}
	}
	return recs
}

// announcement is an unsolicited response carrying every record (RFC 6762
// §8.3): ID 0, no question, authoritative.
func (rs *recordSet) announcement() *dns.Msg {
	return response(0, rs.all(), nil)
}

// goodbye is the announcement with every TTL 0 (RFC 6762 §10.1), except the
// service-type enumeration PTR, which every edgeq node on the link shares.
func (rs *recordSet) goodbye() *dns.Msg {
	var recs []dns.RR
	for _, rr := range rs.all() {
		if strings.EqualFold(rr.Header().Name, rs.enum) {
			continue
		}
		rr.Header().Ttl = 0
		recs = append(recs, rr)
	}
	return response(0, recs, nil)
}

// response builds an authoritative mDNS response.
func response(id uint16, answers, additional []dns.RR) *dns.Msg {
	m := new(dns.Msg)
	m.Id = id
	m.Response = true
	m.Authoritative = true
	m.Answer = answers
	m.Extra = additional
	m.Compress = true
	return m
}

// legacyRecords returns copies of rrs fit for a legacy unicast reply: TTL at
// most 10 s, no cache-flush bit (RFC 6762 §6.7).
func legacyRecords(rrs []dns.RR) []dns.RR {
	out := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		rr = dns.Copy(rr)
		h := rr.Header()
		h.Class &^= cacheFlush
		h.Ttl = min(h.Ttl, legacyMaxTTL)
		out = append(out, rr)
	}
	return out
}
