package mdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// maxPacket bounds a received mDNS packet (RFC 6762 §17: 9000 bytes).
const maxPacket = 9000

// mconn is the 5353 socket of a Responder or a Browser's passive listener.
type mconn struct {
	udp *net.UDPConn
	pc  *ipv4.PacketConn
	ifi *net.Interface
}

// listenMDNS opens the responder's socket, 0.0.0.0:5353, the way avahi
// does, so that both coexist on one host: SO_REUSEADDR and SO_REUSEPORT
// (through net.ListenConfig.Control), and IP_MULTICAST_ALL off so that only
// the group joined here, on ifi, is delivered. See setupMDNS for the rest.
func listenMDNS(ifi *net.Interface) (*mconn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = reuseOptions(int(fd)) })
		return errors.Join(err, serr)
	}}
	c, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", mdnsPort))
	if err != nil {
		return nil, fmt.Errorf("mdns: listen on udp4 port %d: %w", mdnsPort, err)
	}
	return setupMDNS(c.(*net.UDPConn), ifi)
}

// listenGroup opens a receive-only socket bound to 224.0.0.251:5353, for
// the browser's passive listener. Bound to the group address, it never
// takes a unicast datagram meant for the responder's socket (the kernel
// spreads unicast over the sockets of one SO_REUSEPORT group). Go's
// ListenPacket rewrites a multicast address to the wildcard, hence the raw
// socket.
func listenGroup(ifi *net.Interface) (*mconn, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("mdns: socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mdns-group")
	defer f.Close() // FilePacketConn works on a duplicate
	if err := reuseOptions(fd); err != nil {
		return nil, fmt.Errorf("mdns: socket options: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: mdnsPort, Addr: mdnsGroup.Addr().As4()}); err != nil {
		return nil, fmt.Errorf("mdns: bind %v: %w", mdnsGroup, err)
	}
	c, err := net.FilePacketConn(f)
	if err != nil {
		return nil, fmt.Errorf("mdns: %w", err)
	}
	return setupMDNS(c.(*net.UDPConn), ifi)
}

func reuseOptions(fd int) error {
	for _, o := range []struct{ level, opt, value int }{
		{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1},
		{unix.SOL_SOCKET, unix.SO_REUSEPORT, 1},
		{unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0},
	} {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.value); err != nil {
			return err
		}
	}
	return nil
}

// setupMDNS joins 224.0.0.251 on ifi, sends multicast out of ifi with TTL
// 255 (and unicast with TTL 255, RFC 6762 §11), loops multicast back to this
// host (for a local avahi), and asks for the arrival interface and
// destination of each datagram. It closes udp on error.
func setupMDNS(udp *net.UDPConn, ifi *net.Interface) (*mconn, error) {
	pc := ipv4.NewPacketConn(udp)
	group := &net.UDPAddr{IP: net.IP(mdnsGroup.Addr().AsSlice())}
	steps := []struct {
		what string
		err  func() error
	}{
		{"join 224.0.0.251", func() error { return pc.JoinGroup(ifi, group) }},
		{"set multicast interface", func() error { return pc.SetMulticastInterface(ifi) }},
		{"set multicast ttl", func() error { return pc.SetMulticastTTL(255) }},
		{"set ttl", func() error { return pc.SetTTL(255) }},
		{"set multicast loopback", func() error { return pc.SetMulticastLoopback(true) }},
		{"request packet info", func() error {
			return pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		}},
	}
	for _, s := range steps {
		if err := s.err(); err != nil {
			udp.Close()
			return nil, fmt.Errorf("mdns: %s on %s: %w", s.what, ifi.Name, err)
		}
	}
	return &mconn{udp: udp, pc: pc, ifi: ifi}, nil
}

// packet is one datagram received on the interface.
type packet struct {
	data    []byte
	src     netip.AddrPort
	toGroup bool
}

// read returns the next datagram that arrived on our interface. Datagrams
// from other interfaces are skipped. It returns an error once closed.
func (c *mconn) read(buf []byte) (packet, error) {
	for {
		n, cm, src, err := c.pc.ReadFrom(buf)
		if err != nil {
			return packet{}, err
		}
		if cm != nil && cm.IfIndex != 0 && cm.IfIndex != c.ifi.Index {
			continue
		}
		ua, ok := src.(*net.UDPAddr)
		if !ok {
			continue
		}
		ap := ua.AddrPort()
		p := packet{data: append([]byte(nil), buf[:n]...), src: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
		p.toGroup = cm == nil || cm.Dst == nil || cm.Dst.IsMulticast()
		return p, nil
	}
}

// send writes b to dst: the group goes out of our interface.
func (c *mconn) send(b []byte, dst netip.AddrPort) error {
	_, err := c.udp.WriteToUDPAddrPort(b, dst)
	return err
}

func (c *mconn) close() error { return c.udp.Close() }

// interfaceInfo returns the interface, its IPv4 addresses and its on-link
// IPv4 prefixes.
func interfaceInfo(name string) (*net.Interface, []net.IP, []netip.Prefix, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("mdns: interface %q: %w", name, err)
	}
	if ifi.Flags&net.FlagMulticast == 0 {
		return nil, nil, nil, fmt.Errorf("mdns: interface %q does not support multicast", name)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("mdns: addresses of %q: %w", name, err)
	}
	var prefixes []netip.Prefix
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP.To4()); ok {
				ones, bits := ipn.Mask.Size()
				if bits == 8*net.IPv6len {
					ones -= 8 * (net.IPv6len - net.IPv4len)
				}
				prefixes = append(prefixes, netip.PrefixFrom(ip, ones).Masked())
			}
		}
	}
	return ifi, advertisable(addrs), prefixes, nil
}
