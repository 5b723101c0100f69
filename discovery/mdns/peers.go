package mdns

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Peer is a gateway this node can reach: discovered by mDNS, configured in
// StaticPeers, or both.
type Peer struct {
	// Node is what the peer published. A static peer not (yet) discovered
	// has only PeerPort set.
	Node
	// Dial is the "host:port" to connect to: the static entry for a static
	// peer, otherwise the first published address and the peer port.
	Dial string
	// Static is true when Dial comes from Config.StaticPeers.
	Static bool
	// LastSeen is the last time mDNS reported the peer; zero when it never did.
	LastSeen time.Time
}

// Reasons a sighting is not taken.
var (
	errSelf         = errors.New("our own records")
	errOtherCluster = errors.New("another cluster")
	errNameMismatch = errors.New("instance name does not match the TXT id")
	errPortMismatch = errors.New("SRV port differs from the TXT port")
	errNotService   = errors.New("not an instance of our service")
	errNoAddress    = errors.New("no address")
	errSaidGoodbye  = errors.New("said goodbye in this round")
	errTooManyPeers = errors.New("peer table full")
)

// maxPeers bounds the peer table against a flood of forged instances.
const maxPeers = 256

// via says how a sighting arrived.
type via int

const (
	// viaQuery is an entry of hashicorp's Query. It carries no TTL, so it may
	// come from a goodbye heard during the query window.
	viaQuery via = iota
	// viaMulticast is a multicast response with a non-zero TTL, heard by the
	// passive listener (an announcement or an answer to any querier).
	viaMulticast
)

// peerTable is the Browser's pure state: discovered peers by ID, counted in
// browse rounds. Not safe for concurrent use; time is passed in.
type peerTable struct {
	service      string // fully qualified service name
	selfID       string
	cluster      string
	expiryRounds uint64
	static       []staticPeer

	round uint64
	peers map[string]*peerEntry
	// tomb holds IDs said goodbye to, with the round of the goodbye. Query
	// entries for them are ignored in that round: hashicorp's Query reports
	// a goodbye packet heard in its window as a live entry.
	tomb map[string]uint64
}

type peerEntry struct {
	node      Node
	instance  string
	lastSeen  time.Time
	lastRound uint64
}

func newPeerTable(cfg Config, self Node) *peerTable {
	t := &peerTable{
		service:      cfg.serviceName(),
		selfID:       self.ID,
		cluster:      self.Cluster,
		expiryRounds: uint64(cfg.ExpiryRounds),
		peers:        map[string]*peerEntry{},
		tomb:         map[string]uint64{},
	}
	for _, s := range cfg.StaticPeers {
		if p, err := parseStaticPeer(s); err == nil {
			t.static = append(t.static, p)
		}
	}
	return t
}

// beginRound starts a browse round. Goodbye tombstones of earlier rounds end.
func (t *peerTable) beginRound() {
	t.round++
	for id, r := range t.tomb {
		if r < t.round {
			delete(t.tomb, id)
		}
	}
}

// endRound ends a round and removes the peers not seen in the last
// expiryRounds rounds, returning their IDs.
func (t *peerTable) endRound() (expired []string) {
	for id, e := range t.peers {
		if t.round-e.lastRound >= t.expiryRounds {
			delete(t.peers, id)
			expired = append(expired, id)
		}
	}
	slices.Sort(expired)
	return expired
}

// observe records a sighting of node n under the instance name instance.
// It returns whether the peer list changed (a new peer, or a field other
// than the last-seen time), or why the sighting was not taken.
func (t *peerTable) observe(instance string, n Node, how via, now time.Time) (bool, error) {
	switch {
	case !hasSuffixFold(instance, "."+t.service):
		return false, errNotService
	case n.ID == t.selfID:
		return false, errSelf
	case n.Cluster != t.cluster:
		return false, errOtherCluster
	case !strings.EqualFold(strings.TrimSuffix(instance[:len(instance)-len(t.service)], "."), instanceLabel(n.ID)):
		return false, errNameMismatch
	case len(n.Addrs) == 0:
		return false, errNoAddress
	}
	if r, ok := t.tomb[n.ID]; ok {
		if how == viaQuery && r >= t.round {
			return false, errSaidGoodbye
		}
		delete(t.tomb, n.ID)
	}
	e, ok := t.peers[n.ID]
	if !ok {
		if len(t.peers) >= maxPeers {
			return false, errTooManyPeers
		}
		e = &peerEntry{}
		t.peers[n.ID] = e
	}
	changed := !ok || !sameNode(e.node, n)
	e.node, e.instance, e.lastSeen, e.lastRound = n, instance, now, t.round
	return changed, nil
}

// goodbye removes the peer published under instance, if any, and ignores
// query sightings of it for the rest of the round. It returns the removed ID.
func (t *peerTable) goodbye(instance string) (string, bool) {
	for id, e := range t.peers {
		if strings.EqualFold(e.instance, instance) {
			delete(t.peers, id)
			t.tomb[id] = t.round
			return id, true
		}
	}
	return "", false
}

// list returns the discovered and static peers, sorted by ID then Dial. A
// static entry whose IP:port a discovered peer publishes is merged into it.
func (t *peerTable) list() []Peer {
	var out []Peer
	used := make([]bool, len(t.static))
	for _, e := range t.peers {
		p := Peer{Node: cloneNode(e.node), LastSeen: e.lastSeen}
		p.Dial = net.JoinHostPort(e.node.Addrs[0].String(), strconv.Itoa(e.node.PeerPort))
		for i, s := range t.static {
			if !used[i] && publishes(e.node, s) {
				used[i] = true
				p.Dial, p.Static = s.dial, true
				break
			}
		}
		out = append(out, p)
	}
	for i, s := range t.static {
		if !used[i] {
			out = append(out, Peer{Node: Node{PeerPort: s.port}, Dial: s.dial, Static: true})
		}
	}
	slices.SortFunc(out, func(a, b Peer) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Dial, b.Dial)
	})
	return out
}

// publishes reports whether n publishes the static peer's IP and port.
func publishes(n Node, s staticPeer) bool {
	ip, err := netip.ParseAddr(s.host)
	if err != nil || n.PeerPort != s.port {
		return false
	}
	for _, a := range n.Addrs {
		if x, ok := netip.AddrFromSlice(a); ok && x.Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

func sameNode(a, b Node) bool {
	return a.ID == b.ID && a.Cluster == b.Cluster && a.Priority == b.Priority &&
		a.Version == b.Version && a.PeerPort == b.PeerPort &&
		slices.EqualFunc(a.Addrs, b.Addrs, net.IP.Equal)
}

// cloneNode copies n deeply, so callers cannot change the table's addresses.
func cloneNode(n Node) Node {
	if n.Addrs != nil {
		addrs := make([]net.IP, len(n.Addrs))
		for i, ip := range n.Addrs {
			addrs[i] = slices.Clone(ip)
		}
		n.Addrs = addrs
	}
	return n
}
