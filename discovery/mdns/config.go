package mdns

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Errors returned by Validate and the constructors.
var (
	// ErrInvalidConfig wraps every Config.Validate error.
	ErrInvalidConfig = errors.New("invalid mdns config")
	// ErrInvalidNode wraps every Node.Validate error.
	ErrInvalidNode = errors.New("invalid node")
)

// Config of a Responder and a Browser. The zero value is not valid: start
// from DefaultConfig and set Interface.
type Config struct {
	// Interface names the network interface (e.g. "eth0") on which to answer,
	// announce and browse. Required, no default: the kernel's default
	// multicast interface is often the uplink on a gateway with a sensor LAN.
	Interface string
	// Service is the DNS-SD service type. Default "_edgeq._tcp".
	Service string
	// Domain is the mDNS domain, ending in a dot. Default "local.".
	Domain string
	// TTL of every published record, whole seconds in [1s, 120s].
	// Default 10s (see the package doc). Legacy unicast replies are capped at
	// 10 s whatever this is.
	TTL time.Duration
	// BrowseInterval is the time between two browse rounds. Default 10s.
	// Each round binds port 5353 for BrowseTimeout, so keep it infrequent.
	BrowseInterval time.Duration
	// BrowseTimeout is how long one round listens for answers; hashicorp's
	// Query always blocks this long. In [100ms, BrowseInterval). Default 1s.
	BrowseTimeout time.Duration
	// ExpiryRounds drops a discovered peer not seen for this many rounds.
	// Default 3 (30 s with the default interval). A goodbye removes a peer
	// at once.
	ExpiryRounds int
	// StaticPeers are "host:port" addresses of peers for networks without
	// multicast. They are always reported; a discovered peer at the same
	// IP:port is reported once, with its identity. Default none.
	StaticPeers []string
	// Logger receives debug and warning messages. Nil: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults; Interface must still be set.
func DefaultConfig() Config {
	return Config{
		Service:        "_edgeq._tcp",
		Domain:         "local.",
		TTL:            10 * time.Second,
		BrowseInterval: 10 * time.Second,
		BrowseTimeout:  time.Second,
		ExpiryRounds:   3,
	}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("mdns: config: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Interface == "":
		return bad("interface is required")
	case !validService(c.Service):
		return bad("service %q is not of the form _name._tcp or _name._udp", c.Service)
	case !validDomain(c.Domain):
		return bad("domain %q must be a name ending in a dot, such as \"local.\"", c.Domain)
	case c.TTL < time.Second || c.TTL > 120*time.Second || c.TTL%time.Second != 0:
		return bad("ttl must be whole seconds in [1s, 120s], got %v", c.TTL)
	case c.BrowseTimeout < 100*time.Millisecond:
		return bad("browse_timeout must be >= 100ms, got %v", c.BrowseTimeout)
	case c.BrowseInterval <= c.BrowseTimeout:
		return bad("browse_interval (%v) must exceed browse_timeout (%v)", c.BrowseInterval, c.BrowseTimeout)
	case c.ExpiryRounds < 1:
		return bad("expiry_rounds must be >= 1, got %d", c.ExpiryRounds)
	}
	for _, p := range c.StaticPeers {
		if _, err := parseStaticPeer(p); err != nil {
			return bad("static peer %q: %v", p, err)
		}
	}
	return nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// serviceName is the fully qualified service type, "_edgeq._tcp.local.".
func (c Config) serviceName() string {
	return strings.Trim(c.Service, ".") + "." + c.Domain
}

func validService(s string) bool {
	name, proto, ok := strings.Cut(s, ".")
	return ok && (proto == "_tcp" || proto == "_udp") &&
		len(name) >= 2 && len(name) <= 16 && name[0] == '_' && isLDH(name[1:])
}

func validDomain(s string) bool {
	if len(s) < 2 || len(s) > 200 || !strings.HasSuffix(s, ".") {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if l == "" || len(l) > 63 || !isLDH(l) {
			return false
		}
	}
	return true
}

func isLDH(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLDHByte(s[i]) {
			return false
		}
	}
	return s != ""
}

func isLDHByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-'
}

// staticPeer is one parsed Config.StaticPeers entry.
type staticPeer struct {
	dial string // as configured
	host string
	port int
}

func parseStaticPeer(s string) (staticPeer, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return staticPeer{}, err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return staticPeer{}, fmt.Errorf("port must be 1-65535")
	}
	if host == "" {
		return staticPeer{}, fmt.Errorf("missing host")
	}
	return staticPeer{dial: s, host: host, port: n}, nil
}
