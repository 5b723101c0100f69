package mqtt

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/internal/tlsfiles"
)

// errForcedReconnect is the connection-lost reason of a connection the bridge
// broke on purpose.
var errForcedReconnect = errors.New("connection broken by the bridge to get redelivery")

// connTracker opens the network connections for paho and remembers the
// current one. Breaking it is how the bridge makes the broker redeliver what
// it left unacked: paho has no "reconnect now", and a failed read takes
// paho's ordinary reconnect path. Each connection gets an epoch, so a message
// can tell which connection it arrived on.
type connTracker struct {
	tls     *tls.Config // nil for tcp
	timeout time.Duration
	// throttle runs before every socket read; it holds reads back while the
	// bridge's queue is filling up (see Bridge.throttleReads).
	throttle func()

	mu    sync.Mutex
	conn  *breakableConn
	epoch atomic.Uint64 // of the current (or last) connection
}

// breakableConn buffers reads and makes a pending Read fail with
// errForcedReconnect. paho reads a packet's header a byte at a time, one
// syscall each, which cost a quarter of the bridge's CPU time. Closing the
// socket would not do to break it: paho ignores "use of closed network
// connection" read errors and notices the loss only when a ping times out.
type breakableConn struct {
	net.Conn
	r      *bufio.Reader // only paho's single reader goroutine reads
	broken atomic.Bool
}

// readBufferSize holds a few dozen typical telemetry messages; it is small
// because what it holds passes the read throttle.
const readBufferSize = 4 << 10

func newBreakableConn(c net.Conn, throttle func()) *breakableConn {
	return &breakableConn{Conn: c, r: bufio.NewReaderSize(throttledReader{c, throttle}, readBufferSize)}
}

// throttledReader calls throttle before each read of the socket.
type throttledReader struct {
	conn     net.Conn
	throttle func()
}

func (r throttledReader) Read(p []byte) (int, error) {
	if r.throttle != nil {
		r.throttle()
	}
	return r.conn.Read(p)
}

func (c *breakableConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && c.broken.Load() {
		return n, errForcedReconnect
	}
	return n, err
}

// breakNow fails the pending and every later Read.
func (c *breakableConn) breakNow() {
	c.broken.Store(true)
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
}

// open is paho's OpenConnectionFunc. paho calls it before each attempt, on the
// goroutine that then starts the connection's router: a message handled after
// it returns belongs to the new epoch.
func (c *connTracker) open(uri *url.URL, _ paho.ClientOptions) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	d := net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", uri.Host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", uri.Redacted(), err)
	}
	if c.tls != nil {
		cfg := c.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = uri.Hostname()
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", uri.Redacted(), err)
		}
		conn = tc
	}
	bc := newBreakableConn(newCoalescingConn(conn), c.throttle)
	c.mu.Lock()
	c.conn = bc
	c.epoch.Add(1)
	c.mu.Unlock()
	return bc, nil
}

// current is the epoch of the current connection.
func (c *connTracker) current() uint64 { return c.epoch.Load() }

// breakEpoch breaks the connection if it is still the one of epoch; it
// reports whether it did. paho then closes it and reconnects.
func (c *connTracker) breakEpoch(epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.epoch.Load() != epoch {
		return false
	}
	c.conn.breakNow()
	c.conn = nil
	return true
}

// loadTLS builds the client TLS configuration from the configured files.
func loadTLS(cfg *Config) (*tls.Config, error) {
	if !isTLS(cfg.Broker) {
		return nil, nil
	}
	tc, err := tlsfiles.Client(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("mqtt[%s].%w", cfg.Name, err)
	}
	return tc, nil
}
