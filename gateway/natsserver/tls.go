package natsserver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"edgeq/gateway/natsproto"
)

// tlsRecordHandshake is the first byte of a TLS ClientHello; NATS protocol
// ops start with ASCII letters.
const tlsRecordHandshake = 0x16

// upgradeTLS runs the TLS handshake of a new connection, as nats-server
// does: after a plaintext INFO saying tls_required, or first for clients
// that start with a ClientHello (handshake_first; with a fallback window,
// a client that sends nothing within it gets INFO first). It reports whether
// INFO was already sent, and false when the connection is to be dropped.
func (c *conn) upgradeTLS() (infoSent, ok bool) {
	s := c.s
	raw := c.nc
	var under net.Conn = raw
	deadline := time.Now().Add(s.cfg.AuthTimeout)
	first := s.cfg.TLSHandshakeFirst
	if first && s.cfg.TLSFallback > 0 {
		_ = raw.SetReadDeadline(time.Now().Add(s.cfg.TLSFallback))
		var b [1]byte
		n, err := raw.Read(b[:])
		var ne net.Error
		switch {
		case n == 1:
			first = b[0] == tlsRecordHandshake
			under = &prefixConn{Conn: raw, prefix: b[:1]}
		case errors.As(err, &ne) && ne.Timeout():
			first = false
		default:
			return false, false
		}
	}
	_ = raw.SetDeadline(deadline)
	if !first {
		if _, err := raw.Write(c.s.info(c)); err != nil {
			return false, false
		}
	}
	tc := tls.Server(under, s.cfg.TLS.Config())
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		var rhe tls.RecordHeaderError
		if errors.As(err, &rhe) && rhe.Conn != nil {
			// A plaintext client: tell it in plaintext, as nats-server does.
			_, _ = rhe.Conn.Write(natsproto.AppendErr(nil, "Secure Connection - TLS Required"))
		}
		s.logger.Debug("TLS handshake failed", "client", c.id, "remote", raw.RemoteAddr().String(), "err", err)
		return false, false
	}
	_ = raw.SetDeadline(time.Time{})
	c.Lock()
	c.nc = tc
	c.Unlock()
	return !first, true
}

// prefixConn gives back bytes read while detecting a ClientHello.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
