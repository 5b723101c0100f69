package mdns

import (
	"net"
	"strings"

	"github.com/miekg/dns"
)

// heard is what one multicast response says about instances of our service.
type heard struct {
	// alive are the instances described completely (SRV, TXT and at least
	// one address) with a non-zero TTL.
	alive []sighting
	// gone are the instance names (presentation form) said goodbye to: a PTR
	// or SRV with TTL 0.
	gone []string
}

// sighting is one instance seen on the wire, not yet validated.
type sighting struct {
	instance string // full instance name, presentation form
	node     Node
	err      error // the TXT did not parse
}

// parseResponse reads a response packet (announcement, goodbye or an answer
// to someone's query) for instances of service, a fully qualified service
// name such as "_edgeq._tcp.local.". It reads the answer and additional
// sections and matches names case-insensitively.
func parseResponse(m *dns.Msg, service string) heard {
	var h heard
	if m == nil || !m.Response {
		return h
	}
	rrs := append(append([]dns.RR(nil), m.Answer...), m.Extra...)
	suffix := "." + service
	var instances []string
	note := func(name string) {
		for _, x := range instances {
			if strings.EqualFold(x, name) {
				return
			}
		}
		instances = append(instances, name)
	}
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.PTR:
			if !strings.EqualFold(rr.Hdr.Name, service) || !hasSuffixFold(rr.Ptr, suffix) {
				continue
			}
			if rr.Hdr.Ttl == 0 {
				h.gone = appendName(h.gone, rr.Ptr)
			} else {
				note(rr.Ptr)
			}
		case *dns.SRV:
			if !hasSuffixFold(rr.Hdr.Name, suffix) {
				continue
			}
			if rr.Hdr.Ttl == 0 {
				h.gone = appendName(h.gone, rr.Hdr.Name)
			} else {
				note(rr.Hdr.Name)
			}
		}
	}
	for _, inst := range instances {
		if containsFold(h.gone, inst) {
			continue
		}
		var srv *dns.SRV
		var txt *dns.TXT
		for _, rr := range rrs {
			if !strings.EqualFold(rr.Header().Name, inst) || rr.Header().Ttl == 0 {
				continue
			}
			switch rr := rr.(type) {
			case *dns.SRV:
				srv = rr
			case *dns.TXT:
				txt = rr
			}
		}
		if srv == nil || txt == nil {
			continue
		}
		var addrs []net.IP
		for _, rr := range rrs {
			if !strings.EqualFold(rr.Header().Name, srv.Target) || rr.Header().Ttl == 0 {
				continue
			}
			switch rr := rr.(type) {
			case *dns.A:
				addrs = append(addrs, rr.A)
			case *dns.AAAA:
				addrs = append(addrs, rr.AAAA)
			}
		}
		if len(addrs) == 0 {
			continue
		}
		n, err := parseTXT(txt.Txt)
		if err == nil && n.PeerPort != int(srv.Port) {
			err = errPortMismatch
		}
		n.Addrs = addrs
		h.alive = append(h.alive, sighting{instance: inst, node: n, err: err})
	}
	return h
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) > len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func appendName(list []string, s string) []string {
	if containsFold(list, s) {
		return list
	}
	return append(list, s)
}
