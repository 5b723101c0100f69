package mdns

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

// Roles run inside a namespace as a child of the test (TestMain). They print
// "KEY json" lines on stdout, log to stderr and take commands on stdin.

func runRole(role string) int {
	var err error
	switch role {
	case "node":
		err = roleNode()
	case "sniff":
		err = roleSniff()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
		return 1
	}
	return 0
}

func emit(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s\n", key, b)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// roleNode runs a Responder and a Browser for the node in NODE_ID,
// NODE_CLUSTER, NODE_PRIORITY, NODE_PORT; BROWSE_INTERVAL, EXPIRY_ROUNDS, TTL and
// ANNOUNCE (announcement count) tune it. It prints READY with the published
// node, PEERS with every change of the peer list, and STOPPED after the
// command "stop" (which sends the goodbye).
func roleNode() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := DefaultConfig()
	cfg.Interface = lanIfName
	cfg.Logger = log
	cfg.BrowseInterval = envDuration("BROWSE_INTERVAL", time.Second)
	cfg.BrowseTimeout = envDuration("BROWSE_TIMEOUT", 500*time.Millisecond)
	cfg.ExpiryRounds = envInt("EXPIRY_ROUNDS", 3)
	cfg.TTL = envDuration("TTL", 10*time.Second)
	node := Node{
		ID:       os.Getenv("NODE_ID"),
		Cluster:  os.Getenv("NODE_CLUSTER"),
		Priority: envInt("NODE_PRIORITY", 0),
		Version:  "test-1",
		PeerPort: envInt("NODE_PORT", 7400),
	}
	r, err := NewResponder(cfg, node)
	if err != nil {
		return err
	}
	r.announcements = envInt("ANNOUNCE", 2)
	b, err := NewBrowser(cfg, node)
	if err != nil {
		return err
	}
	if err := r.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- b.Run(ctx) }()
	emit("READY", r.Node())
	emit("PEERS", b.Peers())

	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- strings.TrimSpace(sc.Text())
		}
		close(cmds) // the parent went away
	}()
	for {
		select {
		case <-b.Updates():
			emit("PEERS", b.Peers())
		case err := <-runErr:
			return fmt.Errorf("browser: %w", err)
		case cmd, ok := <-cmds:
			if ok && cmd != "stop" {
				log.Warn("unknown command", "cmd", cmd)
				continue
			}
			serr := r.Stop()
			cancel()
			<-runErr
			emit("STOPPED", serr == nil)
			return serr
		}
	}
}

// sniffed is one packet seen by the sniff role.
type sniffed struct {
	At      time.Time `json:"at"`
	Src     string    `json:"src"`
	IPTTL   int       `json:"ipttl"`
	Unicast bool      `json:"unicast"` // to the sniffer's own socket, not the group
	ID      uint16    `json:"id"`
	QR      bool      `json:"qr"`
	Q       []string  `json:"q"`       // questions
	RR      []string  `json:"rr"`      // "name type ttl flush" of answers and additional
	Records []string  `json:"records"` // dns.RR.String()
}

func describe(m *dns.Msg) (qs, rrs, full []string) {
	for _, q := range m.Question {
		qs = append(qs, q.Name+" "+dns.TypeToString[q.Qtype])
	}
	for _, rr := range append(append([]dns.RR(nil), m.Answer...), m.Extra...) {
		h := rr.Header()
		rrs = append(rrs, fmt.Sprintf("%s %s %d %v", strings.ToLower(h.Name), dns.TypeToString[h.Rrtype], h.Ttl, h.Class&cacheFlush != 0))
		full = append(full, rr.String())
	}
	return
}

// roleSniff records every mDNS packet on the LAN (SNIFF lines) through its
// own 5353 socket joined to the group, and sends queries on command:
// "qm NAME TYPE" to the group from port 5353, "direct IP NAME TYPE" to
// IP:5353 from port 5353, "legacy NAME TYPE" to the group from an ephemeral
// port (the reply, expected by unicast, is printed as LEGACY).
func roleSniff() error {
	ifi, err := net.InterfaceByName(lanIfName)
	if err != nil {
		return err
	}
	c, err := listenMDNS(ifi)
	if err != nil {
		return err
	}
	if err := c.pc.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		return err
	}
	go func() {
		buf := make([]byte, maxPacket)
		for {
			n, cm, src, err := c.pc.ReadFrom(buf)
			if err != nil {
				return
			}
			m := new(dns.Msg)
			if m.Unpack(buf[:n]) != nil {
				continue
			}
			s := sniffed{At: time.Now(), Src: src.String(), ID: m.Id, QR: m.Response}
			if cm != nil {
				s.IPTTL, s.Unicast = cm.TTL, cm.Dst != nil && !cm.Dst.IsMulticast()
			}
			s.Q, s.RR, s.Records = describe(m)
			emit("SNIFF", s)
		}
	}()
	emit("READY", true)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		q := new(dns.Msg)
		q.SetQuestion(f[len(f)-2], dns.StringToType[f[len(f)-1]])
		q.RecursionDesired = false
		switch f[0] {
		case "qm":
			q.Id = 0
			b, _ := q.Pack()
			if err := c.send(b, mdnsGroup); err != nil {
				return err
			}
		case "direct": // direct IP NAME TYPE: a unicast query from port 5353
			q.Id = 0x5353
			b, _ := q.Pack()
			if err := c.send(b, netip.AddrPortFrom(netip.MustParseAddr(f[1]), mdnsPort)); err != nil {
				return err
			}
		case "legacy":
			q.Id = 0x4242
			if err := legacyQuery(ifi, q); err != nil {
				return err
			}
		}
	}
	return nil
}

// legacyQuery sends q to the group from an ephemeral port and prints the
// first reply as LEGACY (or LEGACY null after a second).
func legacyQuery(ifi *net.Interface, q *dns.Msg) error {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ipv4.NewPacketConn(conn).SetMulticastInterface(ifi); err != nil {
		return err
	}
	b, _ := q.Pack()
	if _, err := conn.WriteToUDPAddrPort(b, mdnsGroup); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, maxPacket)
	for {
		n, src, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			emit("LEGACY", nil)
			return nil
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil {
			continue
		}
		s := sniffed{At: time.Now(), Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()).String(), ID: m.Id, QR: m.Response, Unicast: true}
		s.Q, s.RR, s.Records = describe(m)
		emit("LEGACY", s)
		return nil
	}
}
