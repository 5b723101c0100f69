package mdns

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// Node is what a gateway publishes about itself.
type Node struct {
	// ID is the node ID: 1–128 bytes of [A-Za-z0-9_:@-] (the device ID
	// rules). It names the service instance and the host.
	ID string
	// Cluster is the cluster name: 1–64 bytes of [A-Za-z0-9_.:@-]. Browsers
	// report only peers of their own cluster.
	Cluster string
	// Priority ranks the node in elections; it must fit in 32 bits.
	Priority int
	// Version is the software version: 1–64 printable ASCII bytes, no spaces.
	Version string
	// PeerPort is the TCP port of the peer protocol (the SRV port).
	PeerPort int
	// Addrs are the addresses to publish. Empty on a Responder: the IPv4
	// addresses of the configured interface. Link-local IPv6 addresses are
	// never published (their zone cannot travel).
	Addrs []net.IP
}

const (
	maxIDLen      = 128
	maxClusterLen = 64
	maxVersionLen = 64
	maxLabelLen   = 63 // RFC 1035 label limit
	txtVersion    = "1"
)

// Validate checks every field but Addrs, whose emptiness a Responder fills.
func (n Node) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("mdns: node: %w: %s", ErrInvalidNode, fmt.Sprintf(format, args...))
	}
	switch {
	case !validChars(n.ID, maxIDLen, "_:@-"):
		return bad("id %q must be 1-%d bytes of [A-Za-z0-9_:@-]", n.ID, maxIDLen)
	case !validChars(n.Cluster, maxClusterLen, "_.:@-"):
		return bad("cluster %q must be 1-%d bytes of [A-Za-z0-9_.:@-]", n.Cluster, maxClusterLen)
	case n.Priority < math.MinInt32 || n.Priority > math.MaxInt32:
		return bad("priority %d does not fit in 32 bits", n.Priority)
	case !validVersion(n.Version):
		return bad("version %q must be 1-%d printable ASCII bytes without spaces", n.Version, maxVersionLen)
	case n.PeerPort < 1 || n.PeerPort > 65535:
		return bad("peer port %d must be 1-65535", n.PeerPort)
	}
	for _, ip := range n.Addrs {
		if ip.To16() == nil || ip.IsUnspecified() || ip.IsMulticast() {
			return bad("address %v cannot be published", ip)
		}
	}
	return nil
}

func validChars(s string, max int, extra string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLDHByte(s[i]) && !strings.ContainsRune(extra, rune(s[i])) {
			return false
		}
	}
	return true
}

func validVersion(s string) bool {
	if s == "" || len(s) > maxVersionLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// txt returns the TXT strings of n. Validate bounds every field, so each
// string stays well under the 255-byte limit of a TXT string (a longer one
// makes hashicorp's records fail to pack).
func (n Node) txt() []string {
	return []string{
		"txtvers=" + txtVersion,
		"id=" + n.ID,
		"cluster=" + n.Cluster,
		"priority=" + strconv.Itoa(n.Priority),
		"version=" + n.Version,
		"port=" + strconv.Itoa(n.PeerPort),
	}
}

// parseTXT reads the TXT strings of a peer into a Node (without Addrs) and
// validates it. Keys are case-insensitive and the first occurrence of a key
// wins (RFC 6763 §6.4); unknown keys are ignored.
func parseTXT(fields []string) (Node, error) {
	kv := make(map[string]string, len(fields))
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		k = strings.ToLower(k)
		if _, dup := kv[k]; !dup && k != "" {
			kv[k] = v
		}
	}
	var n Node
	n.ID, n.Cluster, n.Version = kv["id"], kv["cluster"], kv["version"]
	var err error
	if n.Priority, err = strconv.Atoi(kv["priority"]); err != nil {
		return Node{}, fmt.Errorf("mdns: txt: %w: priority %q", ErrInvalidNode, kv["priority"])
	}
	if n.PeerPort, err = strconv.Atoi(kv["port"]); err != nil {
		return Node{}, fmt.Errorf("mdns: txt: %w: port %q", ErrInvalidNode, kv["port"])
	}
	if err := n.Validate(); err != nil {
		return Node{}, err
	}
	return n, nil
}

// instanceLabel is the DNS-SD instance name of a node, in miekg/dns
// presentation form ('@' escaped, as miekg/dns prints received names). An
// ID longer than a label keeps a prefix and gains a hash suffix.
func instanceLabel(id string) string {
	if len(id) > maxLabelLen {
		id = id[:maxLabelLen-13] + "-" + shortHash(id)
	}
	return strings.ReplaceAll(id, "@", `\@`)
}

// hostLabel is the host label of a node ("<id>" in "<id>.local."): the ID
// where it is a valid host name, otherwise its letters, digits and dashes
// with the rest turned into dashes and a hash suffix that keeps distinct IDs
// distinct.
func hostLabel(id string) string {
	if len(id) <= maxLabelLen && isLDH(id) {
		return id
	}
	b := []byte(id)
	for i := range b {
		if !isLDHByte(b[i]) {
			b[i] = '-'
		}
	}
	prefix := string(b)
	if len(prefix) > maxLabelLen-13 {
		prefix = prefix[:maxLabelLen-13]
	}
	return prefix + "-" + shortHash(id)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// advertisable filters the addresses a Responder publishes by default.
func advertisable(addrs []net.Addr) []net.IP {
	var ips []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && !ip4.IsLoopback() && !ip4.IsUnspecified() {
			ips = append(ips, ip4)
		}
	}
	return ips
}
