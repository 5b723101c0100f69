package natsserver

import (
	"strings"

	"edgeq/gateway/subject"
)

// Permissions are one user's publish and subscribe rules, in nats-server's
// shape: a subject is allowed when Allow is empty or one of its patterns
// matches, and no Deny pattern does.
type Permissions struct {
	Publish, Subscribe Rules
}

// Rules are allow and deny subject patterns (wildcards as in filters).
type Rules struct {
	Allow, Deny []string
}

// controlPrefixes are edgeq's own control subjects a worker publishes to
// (acks, credit): always allowed, they act only on what the connection
// was given.
var controlPrefixes = []string{"$EQ.ACK.", "$EQ.RDY."}

// mayPublish reports whether p allows publishing to subj (nil p: all).
func (p *Permissions) mayPublish(subj string) bool {
	if p == nil {
		return true
	}
	for _, cp := range controlPrefixes {
		if strings.HasPrefix(subj, cp) {
			return true
		}
	}
	r := p.Publish
	ok := len(r.Allow) == 0
	for _, a := range r.Allow {
		if subject.Match(a, subj) {
			ok = true
			break
		}
	}
	for _, d := range r.Deny {
		if subject.Match(d, subj) {
			return false
		}
	}
	return ok
}

// maySubscribe reports whether p allows a subscription on filter: an allow
// pattern must cover every subject the filter matches, and no deny pattern
// may match any of them (a filter that overlaps a deny is refused whole:
// edgeq does not filter deliveries one by one).
func (p *Permissions) maySubscribe(filter string) bool {
	if p == nil {
		return true
	}
	r := p.Subscribe
	ok := len(r.Allow) == 0
	for _, a := range r.Allow {
		if covers(a, filter) {
			ok = true
			break
		}
	}
	for _, d := range r.Deny {
		if overlaps(d, filter) {
			return false
		}
	}
	return ok
}

// covers reports whether every subject filter matches is matched by pattern.
func covers(pattern, filter string) bool {
	p, f := strings.Split(pattern, "."), strings.Split(filter, ".")
	for i, pt := range p {
		if pt == ">" {
			return i < len(f)
		}
		if i >= len(f) {
			return false
		}
		if pt == "*" {
			if f[i] == ">" {
				return false
			}
			continue
		}
		if pt != f[i] {
			return false
		}
	}
	return len(p) == len(f)
}

// overlaps reports whether some subject matches both filters.
func overlaps(a, b string) bool {
	x, y := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		if i == len(x) || i == len(y) {
			return len(x) == len(y)
		}
		if x[i] == ">" || y[i] == ">" {
			return true
		}
		if x[i] != "*" && y[i] != "*" && x[i] != y[i] {
			return false
		}
	}
}
