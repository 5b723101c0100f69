package nsqserver

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"edgeq/gateway/groups"
	"edgeq/internal/connset"
)

type connState uint8

const (
	stInit connState = iota
	stSubscribed
	stClosing // after CLS: no more deliveries, FIN/REQ/TOUCH still taken
)

// conn is one client connection: the reader goroutine parses and handles
// commands; the writer goroutine flushes output and sends heartbeats.
type conn struct {
	s  *Server
	id uint64
	nc net.Conn

	// Reader goroutine only.
	state       connState
	identified  bool
	authed      bool
	heartbeat   time.Duration
	group       groups.GroupKey
	member      groups.MemberID // the connection's name for its member
	groupMember groups.MemberID // its ID in the group
	joined      bool
	cmd         Command
	tlsOn       bool       // the connection is upgraded
	tlsDone     chan error // IDENTIFY asked the writer to upgrade; its answer

	// The outbox's lock guards the fields below too. Its Out is bound by
	// cfg.MaxPending.
	connset.Outbox
	hbSet    chan time.Duration // cap 1: heartbeat interval from IDENTIFY
	replies  []*reply           // responses held back behind a publish awaiting durability; bound: cfg.MaxPendingPubs
	room     chan struct{}      // cap 1: replies shrank
	rdy      int64
	inflight map[uint64]entry // message ID -> delivery; bound: maxIDs
	nextSeq  uint64
	// upgrade asks the writer to run the TLS handshake once it has written
	// what is queued (the IDENTIFY response); cancelTLS ends a handshake in
	// progress (shut).
	upgrade   chan error
	cancelTLS context.CancelFunc
	// why is the first close cause noted (closeFor); serve counts it when
	// the connection ends, ClosedByClient when none was noted.
	why    connset.CloseReason
	hasWhy bool
}

// entry is a message in flight on this connection.
type entry struct {
	h  groups.AckHandle
	at time.Time // delivered or last touched
}

// reply is a response or error frame in the connection's response order.
type reply struct {
	frame int32
	data  []byte
	ready bool
}

func newConn(s *Server, id uint64, nc net.Conn) *conn {
	c := &conn{s: s, id: id, nc: nc, heartbeat: s.cfg.HeartbeatInterval,
		hbSet: make(chan time.Duration, 1), room: make(chan struct{}, 1), inflight: map[uint64]entry{},
		member: groups.MemberID(fmt.Sprintf("nsq-%d", id))}
	c.Init()
	return c
}

func (c *conn) limits() Limits {
	return Limits{MaxLine: 1024, MaxMsgSize: c.s.cfg.MaxMsgSize, MaxBodySize: c.s.cfg.MaxBodySize}
}

// maxIDs bounds the message-ID table: the largest RDY plus room for
// deliveries that timed out here and went to another member unseen.
func (c *conn) maxIDs() int { return c.s.cfg.MaxRdyCount + 256 }

func (c *conn) serve() {
	writerDone := make(chan struct{})
	go c.writer(writerDone)
	defer func() {
		c.shut()
		<-writerDone
		c.cleanup()
		c.Lock()
		why := c.why
		c.Unlock()
		c.s.stats.closes.Add(why) // ClosedByClient unless noted
		c.s.conns.Remove(c.id)
	}()
	_ = c.nc.SetReadDeadline(time.Now().Add(2 * c.s.cfg.HeartbeatInterval))
	var magic [4]byte
	if _, err := io.ReadFull(c.nc, magic[:]); err != nil {
		return
	}
	if string(magic[:]) != Magic {
		c.closeFor(connset.ClosedProtocolError)
		c.sendError(fatalf("E_BAD_PROTOCOL", "bad protocol magic %q", magic[:]))
		return
	}
	lim := c.limits()
	maxBuf := lim.MaxLine + 8 + max(lim.MaxBodySize, lim.MaxMsgSize)
	buf := make([]byte, 0, 32<<10)
	for {
		if c.heartbeat > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(2 * c.heartbeat))
		} else {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(max(2*cap(buf), 32<<10), maxBuf))
			copy(nb, buf)
			buf = nb
		}
		n, err := c.nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		off := 0
		for off < len(buf) {
			m, perr := ParseCommand(buf[off:], lim, &c.cmd)
			if perr != nil {
				c.fail(perr)
				return
			}
			if m == 0 {
				break
			}
			off += m
			if herr := c.handle(&c.cmd); herr != nil {
				var pe *Error
				if !errors.As(herr, &pe) {
					pe = fatalf("E_INVALID", "%v", herr)
				}
				if pe.Fatal {
					c.fail(pe)
					return
				}
				c.sendError(pe)
			}
			if c.tlsDone != nil {
				break
			}
		}
		buf = buf[:copy(buf, buf[off:])]
		if len(buf) == maxBuf {
			c.fail(fatalf("E_BAD_BODY", "command larger than %d bytes", maxBuf))
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.logger.Debug("client read", "client", c.id, "err", err)
			}
			if connset.TimedOut(err) {
				// Nothing, not even a NOP, within two heartbeats (nsqd's rule).
				c.closeFor(connset.ClosedStale)
			}
			return
		}
		if c.tlsDone != nil {
			done := c.tlsDone
			c.tlsDone = nil
			if len(buf) > 0 {
				// The client must wait for the IDENTIFY response; what it
				// sent meanwhile is neither plaintext protocol nor TLS.
				c.s.stats.TLSFailures.Add(1)
				c.closeFor(connset.ClosedTLSHandshake)
				c.s.logger.Debug("NSQ client sent data before the TLS handshake", "client", c.id)
				return
			}
			if err := <-done; err != nil {
				c.closeFor(connset.ClosedTLSHandshake)
				return
			}
			c.tlsOn = true
		}
	}
}

// fail sends a fatal error after the responses already owed, then lets serve
// end the connection.
func (c *conn) fail(err error) {
	var pe *Error
	if !errors.As(err, &pe) {
		pe = fatalf("E_INVALID", "%v", err)
	}
	if strings.HasPrefix(pe.Code, "E_AUTH") || pe.Code == "E_UNAUTHORIZED" {
		c.closeFor(connset.ClosedAuthViolation)
	} else {
		c.closeFor(connset.ClosedProtocolError)
	}
	c.sendError(pe)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c.Lock()
		n := len(c.replies)
		c.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.s.logger.Debug("closing client connection", "client", c.id, "err", pe.Error())
}

func (c *conn) sendError(e *Error) {
	c.s.stats.countError(e.Code)
	c.respond(FrameError, []byte(e.Error()))
}

// respond queues a response or error frame in response order.
func (c *conn) respond(frame int32, data []byte) {
	c.Lock()
	defer c.Unlock()
	if c.Closed {
		return
	}
	if len(c.replies) > 0 {
		c.replies = append(c.replies, &reply{frame: frame, data: data, ready: true})
		return
	}
	c.Out = AppendFrame(c.Out, frame, data)
	c.Signal()
}

// slot reserves a place in response order for a publish awaiting
// durability, waiting while cfg.MaxPendingPubs are outstanding (the reader
// stops reading: backpressure). Nil when the connection closed meanwhile.
func (c *conn) slot() *reply {
	for {
		c.Lock()
		if c.Closed {
			c.Unlock()
			return nil
		}
		if len(c.replies) < c.s.cfg.MaxPendingPubs {
			r := &reply{}
			c.replies = append(c.replies, r)
			c.Unlock()
			return r
		}
		c.Unlock()
		select {
		case <-c.room:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fill completes a slot and writes every ready response at the front.
func (c *conn) fill(r *reply, frame int32, data []byte) {
	c.Lock()
	defer c.Unlock()
	r.frame, r.data, r.ready = frame, data, true
	if c.Closed {
		return
	}
	i := 0
	for ; i < len(c.replies) && c.replies[i].ready; i++ {
		c.Out = AppendFrame(c.Out, c.replies[i].frame, c.replies[i].data)
		c.replies[i] = nil
	}
	if i == 0 {
		return
	}
	c.replies = c.replies[:copy(c.replies, c.replies[i:])]
	c.Signal()
	select {
	case c.room <- struct{}{}:
	default:
	}
}

var heartbeatFrame = AppendFrame(nil, FrameResponse, []byte("_heartbeat_"))

// respondTLS queues the IDENTIFY response and has the writer run the TLS
// handshake right after writing it, as nsqd does: the response in
// plaintext, then the handshake on the same connection, then OK over TLS.
// Nothing else is written in between. The returned channel gets the
// outcome; the reader must not read the connection until then.
func (c *conn) respondTLS(resp []byte) chan error {
	done := make(chan error, 1)
	c.Lock()
	defer c.Unlock()
	if c.Closed {
		done <- errClosed
		return done
	}
	c.Out = AppendFrame(c.Out, FrameResponse, resp)
	c.upgrade = done
	c.Signal()
	return done
}

// tlsHandshakeTimeout bounds the handshake after IDENTIFY (nsqd's 5s).
const tlsHandshakeTimeout = 5 * time.Second

var okFrame = AppendFrame(nil, FrameResponse, []byte("OK"))

// handshake upgrades the connection to TLS and sends OK over it. Writer
// goroutine only, while the reader waits for its outcome.
func (c *conn) handshake() error {
	ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
	defer cancel()
	c.Lock()
	if c.Closed {
		c.Unlock()
		return errClosed
	}
	c.cancelTLS = cancel
	c.Unlock()
	defer func() {
		c.Lock()
		c.cancelTLS = nil
		c.Unlock()
	}()
	raw := c.nc
	tc := tls.Server(raw, c.s.cfg.TLS.Config())
	if err := tc.HandshakeContext(ctx); err != nil {
		c.s.stats.TLSFailures.Add(1)
		c.s.logger.Debug("NSQ client TLS handshake failed", "client", c.id, "remote", raw.RemoteAddr().String(), "err", err)
		return fmt.Errorf("nsq: TLS handshake: %w", err)
	}
	c.nc = tc
	_ = tc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteDeadline))
	if _, err := tc.Write(okFrame); err != nil {
		return fmt.Errorf("nsq: OK after the TLS handshake: %w", err)
	}
	return nil
}

// writer flushes output and sends heartbeats.
func (c *conn) writer(done chan<- struct{}) {
	defer close(done)
	defer func() { _ = c.nc.Close() }()
	defer func() {
		// Every exit follows shut, so respondTLS asks no more after this.
		c.Lock()
		up := c.upgrade
		c.upgrade = nil
		c.Unlock()
		if up != nil {
			up <- errClosed
		}
	}()
	var tick <-chan time.Time
	var ticker *time.Ticker
	setHB := func(d time.Duration) {
		if ticker != nil {
			ticker.Stop()
			ticker, tick = nil, nil
		}
		if d > 0 {
			ticker = time.NewTicker(d)
			tick = ticker.C
		}
	}
	setHB(c.s.cfg.HeartbeatInterval)
	defer func() { setHB(0) }()
	for {
		select {
		case <-c.Wake():
		case d := <-c.hbSet:
			setHB(d)
			continue
		case <-tick:
			c.Lock()
			if !c.Closed && c.upgrade == nil {
				c.Out = append(c.Out, heartbeatFrame...)
			}
			c.Unlock()
		}
		// A TLS upgrade follows exactly the output queued before it (the
		// IDENTIFY response): take both at once.
		var up chan error
		closed, err := c.Flush(c.nc, c.s.cfg.WriteDeadline, func() { up, c.upgrade = c.upgrade, nil })
		if err != nil {
			if connset.TimedOut(err) {
				c.closeFor(connset.ClosedWriteTimeout)
				c.s.stats.SlowConsumers.Add(1)
				c.s.logger.Info("closing NSQ client: write deadline exceeded", "client", c.id)
			} else {
				c.closeFor(connset.ClosedWriteError)
			}
			if up != nil {
				up <- err
			}
			c.shut()
			return
		}
		if closed {
			if up != nil {
				up <- errClosed
			}
			return
		}
		if up != nil {
			err := c.handshake()
			up <- err
			if err != nil {
				c.shut()
				return
			}
		}
	}
}

// closeFor notes why the connection closes; the first cause counts.
func (c *conn) closeFor(r connset.CloseReason) {
	c.Lock()
	c.noteWhy(r)
	c.Unlock()
}

// noteWhy is closeFor with the lock held.
func (c *conn) noteWhy(r connset.CloseReason) {
	if !c.hasWhy {
		c.why, c.hasWhy = r, true
	}
}

// shut stops output (what is queued is still flushed) and delivery; the
// writer then closes the socket, which ends the reader.
func (c *conn) shut() {
	c.Lock()
	c.Closed = true
	cancel := c.cancelTLS
	c.Unlock()
	if cancel != nil {
		cancel()
	}
	c.Signal()
}

// cleanup leaves the group: what the connection held goes to other members.
// An #ephemeral channel goes with its last consumer, as in nsqd (on a
// standalone node; in a cluster other nodes know the group, and group_ttl
// removes it).
func (c *conn) cleanup() {
	if c.joined {
		c.s.queues.Leave(c.group, c.member)
		if strings.HasSuffix(c.group.Queue, "#ephemeral") {
			if err := c.s.queues.Remove(c.group, func(groups.Member) bool { return false }); err == nil {
				c.s.logger.Debug("ephemeral channel removed with its last consumer", "channel", c.group.Queue)
			}
		}
	}
	c.Lock()
	c.inflight = map[uint64]entry{}
	c.rdy = 0
	c.Unlock()
}

// Deliver makes the connection a groups.Member: the message is encoded
// straight into the output buffer under a fresh message ID.
func (c *conn) Deliver(d *groups.Delivery) bool {
	rec := d.Record
	now := time.Now()
	c.Lock()
	defer c.Unlock()
	if c.Closed {
		return false
	}
	size := MessageSize(len(rec.Payload))
	if len(c.Out)+size > c.s.cfg.MaxPending {
		c.Closed = true
		c.Signal()
		c.noteWhy(connset.ClosedSlowConsumer)
		c.s.stats.SlowConsumers.Add(1)
		c.s.logger.Info("closing NSQ client: slow consumer", "client", c.id, "pending", len(c.Out))
		return false
	}
	if int64(len(c.inflight)) >= c.rdy {
		// Deliveries that timed out here may still have entries; the
		// group no longer counts them.
		c.sweep(now)
		if int64(len(c.inflight)) >= c.rdy {
			c.s.stats.RdyExceeded.Add(1)
			c.s.logger.Warn("delivery beyond the connection's RDY", "client", c.id, "rdy", c.rdy, "in_flight", len(c.inflight))
		}
	}
	if len(c.inflight) >= c.maxIDs() {
		// Only deliveries that timed out (and went elsewhere) can fill the
		// table past the largest RDY.
		c.sweep(now)
		if len(c.inflight) >= c.maxIDs() {
			c.evictOldest()
		}
	}
	c.nextSeq++
	seq := c.nextSeq
	c.inflight[seq] = entry{h: d.Ack, at: now}
	id := FormatID(seq)
	c.Out = AppendMessage(c.Out, rec.Time, uint16(min(d.Deliveries, 1<<16-1)), &id, rec.Payload)
	c.Signal()
	c.s.stats.Delivered.Add(1)
	return true
}

var _ groups.Member = (*conn)(nil)

// sweep drops entries older than ack_wait. Called with mu.
func (c *conn) sweep(now time.Time) {
	for seq, e := range c.inflight {
		if now.Sub(e.at) >= c.s.cfg.AckWait {
			delete(c.inflight, seq)
		}
	}
}

func (c *conn) evictOldest() {
	var oldest uint64
	for seq := range c.inflight {
		if oldest == 0 || seq < oldest {
			oldest = seq
		}
	}
	delete(c.inflight, oldest)
}

// handle carries out one command; an *Error goes back to the client.
func (c *conn) handle(cmd *Command) error {
	if c.s.cfg.TLS != nil && !c.tlsOn && cmd.Kind != CmdIdentify {
		c.s.stats.TLSFailures.Add(1)
		c.closeFor(connset.ClosedTLSHandshake)
		return fatalf("E_INVALID", "cannot %s in current state (TLS required: IDENTIFY with tls_v1 first)", cmd.Kind)
	}
	if c.s.cfg.AuthToken != "" && !c.authed && cmd.Kind != CmdIdentify && cmd.Kind != CmdAuth && cmd.Kind != CmdNop {
		c.s.stats.AuthFailures.Add(1)
		return fatalf("E_AUTH_FIRST", "AUTH required before %s", cmd.Kind)
	}
	switch cmd.Kind {
	case CmdIdentify:
		return c.identify(cmd.Body)
	case CmdAuth:
		return c.auth(cmd.Body)
	case CmdSub:
		return c.sub(cmd)
	case CmdRdy:
		return c.setRdy(cmd.Count)
	case CmdFin, CmdReq, CmdTouch:
		return c.ack(cmd)
	case CmdNop:
		return nil
	case CmdCls:
		if c.state != stSubscribed {
			return fatalf("E_INVALID", "cannot CLS in current state")
		}
		c.state = stClosing
		if err := c.s.queues.SetCredit(c.group, c.member, 0); err != nil {
			c.s.logger.Debug("CLS", "client", c.id, "err", err)
		}
		c.Lock()
		c.rdy = 0
		c.Unlock()
		c.respond(FrameResponse, []byte("CLOSE_WAIT"))
		return nil
	case CmdPub:
		return c.publish(cmd.Topic, [][]byte{cmd.Body}, "PUB")
	case CmdMpub:
		return c.publish(cmd.Topic, cmd.Bodies, "MPUB")
	case CmdDpub:
		return softf("E_INVALID", "DPUB is not supported: edgeq keeps each device's messages in order, a deferred one would hold back the rest")
	}
	return fatalf("E_INVALID", "invalid command")
}

// identifyData is what IDENTIFY may carry (go-nsq's and nsqd's names).
type identifyData struct {
	ClientID            string `json:"client_id"`
	Hostname            string `json:"hostname"`
	UserAgent           string `json:"user_agent"`
	FeatureNegotiation  bool   `json:"feature_negotiation"`
	HeartbeatInterval   int    `json:"heartbeat_interval"`
	OutputBufferSize    int    `json:"output_buffer_size"`
	OutputBufferTimeout int    `json:"output_buffer_timeout"`
	TLSv1               bool   `json:"tls_v1"`
	Snappy              bool   `json:"snappy"`
	Deflate             bool   `json:"deflate"`
	DeflateLevel        int    `json:"deflate_level"`
	SampleRate          int32  `json:"sample_rate"`
	MsgTimeout          int    `json:"msg_timeout"`
}

// identifyResponse answers feature negotiation. tls_v1 is on when the
// listener has TLS and the client asked for it; snappy, deflate and
// sampling are never enabled (clients then go on without them, as with an
// nsqd that has them off); msg_timeout is the groups' ack_wait, which is a
// group's setting, not a connection's.
type identifyResponse struct {
	MaxRdyCount         int64  `json:"max_rdy_count"`
	Version             string `json:"version"`
	MaxMsgTimeout       int64  `json:"max_msg_timeout"`
	MsgTimeout          int64  `json:"msg_timeout"`
	TLSv1               bool   `json:"tls_v1"`
	Deflate             bool   `json:"deflate"`
	DeflateLevel        int    `json:"deflate_level"`
	MaxDeflateLevel     int    `json:"max_deflate_level"`
	Snappy              bool   `json:"snappy"`
	SampleRate          int32  `json:"sample_rate"`
	AuthRequired        bool   `json:"auth_required"`
	OutputBufferSize    int    `json:"output_buffer_size"`
	OutputBufferTimeout int64  `json:"output_buffer_timeout"`
}

const maxHeartbeat = 60 * time.Second

func (c *conn) identify(body []byte) error {
	if c.state != stInit || c.identified {
		return fatalf("E_INVALID", "cannot IDENTIFY in current state")
	}
	var id identifyData
	if err := json.Unmarshal(body, &id); err != nil {
		return fatalf("E_BAD_BODY", "IDENTIFY failed to decode JSON body")
	}
	switch {
	case id.HeartbeatInterval == -1:
		c.heartbeat = 0
	case id.HeartbeatInterval == 0:
	case id.HeartbeatInterval >= 1000 && time.Duration(id.HeartbeatInterval)*time.Millisecond <= maxHeartbeat:
		c.heartbeat = time.Duration(id.HeartbeatInterval) * time.Millisecond
	default:
		return fatalf("E_BAD_BODY", "IDENTIFY heartbeat interval (%d) is invalid", id.HeartbeatInterval)
	}
	c.identified = true
	select {
	case c.hbSet <- c.heartbeat:
	default:
	}
	useTLS := c.s.cfg.TLS != nil
	if useTLS && (!id.TLSv1 || !id.FeatureNegotiation) {
		c.s.stats.TLSFailures.Add(1)
		c.closeFor(connset.ClosedTLSHandshake)
		return fatalf("E_INVALID", "TLS required: IDENTIFY with tls_v1 and feature_negotiation (go-nsq: Config.TlsV1)")
	}
	if (id.TLSv1 && !useTLS) || id.Snappy || id.Deflate || id.SampleRate > 0 {
		c.s.logger.Debug("IDENTIFY asked for features edgeq does not offer", "client", c.id,
			"tls_v1", id.TLSv1 && !useTLS, "snappy", id.Snappy, "deflate", id.Deflate, "sample_rate", id.SampleRate)
	}
	if !id.FeatureNegotiation {
		c.respond(FrameResponse, []byte("OK"))
		return nil
	}
	resp, _ := json.Marshal(identifyResponse{
		MaxRdyCount:         int64(c.s.cfg.MaxRdyCount),
		Version:             c.s.cfg.Version,
		MaxMsgTimeout:       c.s.cfg.AckWait.Milliseconds(),
		MsgTimeout:          c.s.cfg.AckWait.Milliseconds(),
		MaxDeflateLevel:     6,
		AuthRequired:        c.s.cfg.AuthToken != "",
		OutputBufferSize:    id.OutputBufferSize,
		OutputBufferTimeout: int64(id.OutputBufferTimeout),
		TLSv1:               useTLS,
	})
	if useTLS {
		c.tlsDone = c.respondTLS(resp)
		return nil
	}
	c.respond(FrameResponse, resp)
	return nil
}

func (c *conn) auth(secret []byte) error {
	if c.state != stInit {
		return fatalf("E_INVALID", "cannot AUTH in current state")
	}
	if c.authed {
		return fatalf("E_INVALID", "AUTH already set")
	}
	if c.s.cfg.AuthToken == "" {
		return fatalf("E_AUTH_DISABLED", "AUTH disabled")
	}
	if subtle.ConstantTimeCompare(secret, []byte(c.s.cfg.AuthToken.Reveal())) != 1 {
		c.s.stats.AuthFailures.Add(1)
		return fatalf("E_AUTH_FAILED", "AUTH failed")
	}
	c.authed = true
	resp, _ := json.Marshal(struct {
		Identity        string `json:"identity"`
		IdentityURL     string `json:"identity_url"`
		PermissionCount int    `json:"permission_count"`
	}{Identity: "token", PermissionCount: 1})
	c.respond(FrameResponse, resp)
	return nil
}

// filterOf maps a topic to the subject filter of its queue groups: the
// telemetry topic to <prefix>.>, a per-device topic <prefix>.<device> to
// that device's subject.
func (s *Server) filterOf(topic []byte) (string, bool) {
	p := s.cfg.TelemetryPrefix
	switch {
	case string(topic) == p:
		return p + ".>", true
	case len(topic) > len(p)+1 && string(topic[:len(p)]) == p && topic[len(p)] == '.':
		return string(topic), true
	}
	return "", false
}

func (c *conn) sub(cmd *Command) error {
	if c.state != stInit {
		return fatalf("E_INVALID", "cannot SUB in current state")
	}
	if c.heartbeat <= 0 {
		return fatalf("E_INVALID", "cannot SUB with heartbeats disabled")
	}
	filter, ok := c.s.filterOf(cmd.Topic)
	if !ok {
		p := c.s.cfg.TelemetryPrefix
		return fatalf("E_BAD_TOPIC", "SUB topic %q is not served: use %q or %q.<device>", cmd.Topic, p, p)
	}
	c.group = groups.GroupKey{Filter: filter, Queue: string(cmd.Channel)}
	gm, err := c.s.queues.Join(c.group, c.member, c, 0) // RDY 0 until the client says
	if err != nil {
		return fatalf("E_SUB_FAILED", "SUB failed %v", err)
	}
	c.groupMember, c.joined, c.state = gm, true, stSubscribed
	c.respond(FrameResponse, []byte("OK"))
	return nil
}

// setRdy makes n the member's credit. The connection's own count of what it
// may hold rises before the group hears of it and falls after, so the
// server-side check in Deliver never sees a delivery the group was allowed
// to make as one beyond RDY.
func (c *conn) setRdy(n int64) error {
	switch c.state {
	case stClosing:
		return nil // nsqd ignores RDY after CLS
	case stInit:
		return fatalf("E_INVALID", "cannot RDY in current state")
	}
	if n < 0 || n > int64(c.s.cfg.MaxRdyCount) {
		return fatalf("E_INVALID", "RDY count %d out of range 0-%d", n, c.s.cfg.MaxRdyCount)
	}
	c.Lock()
	cur := c.rdy
	if n > cur {
		c.rdy = n
	}
	c.Unlock()
	if n == cur {
		return nil // go-nsq repeats its RDY as it goes
	}
	if err := c.s.queues.SetCredit(c.group, c.member, int(n)); err != nil {
		c.s.logger.Warn("RDY refused by the group", "client", c.id, "err", err)
	}
	c.Lock()
	c.rdy = n
	c.Unlock()
	return nil
}

// ack takes FIN, REQ and TOUCH: only for a message this connection holds.
func (c *conn) ack(cmd *Command) error {
	if c.state == stInit {
		return fatalf("E_INVALID", "cannot %s in current state", cmd.Kind)
	}
	code := "E_FIN_FAILED"
	switch cmd.Kind {
	case CmdReq:
		code = "E_REQ_FAILED"
	case CmdTouch:
		code = "E_TOUCH_FAILED"
	}
	seq, ok := ParseID(cmd.ID)
	c.Lock()
	e, held := c.inflight[seq]
	if held {
		if cmd.Kind == CmdTouch {
			c.inflight[seq] = entry{h: e.h, at: time.Now()}
		} else {
			delete(c.inflight, seq)
		}
	}
	c.Unlock()
	if !ok || !held {
		c.s.stats.FinFailed.Add(1)
		return softf(code, "%s %s failed ID not in flight", cmd.Kind, cmd.ID)
	}
	a := groups.Ack{Handle: e.h}
	switch cmd.Kind {
	case CmdFin:
		a.Kind = groups.AckDone
		c.s.stats.Fin.Add(1)
	case CmdReq:
		a.Kind, a.Delay = groups.AckNak, min(cmd.Delay, c.s.cfg.MaxReqTimeout)
		c.s.stats.Req.Add(1)
	case CmdTouch:
		a.Kind = groups.AckInProgress
		c.s.stats.Touch.Add(1)
	}
	if err := c.s.queues.Ack(a); err != nil {
		c.s.logger.Debug("acknowledgement not taken", "client", c.id, "cmd", cmd.Kind.String(), "err", err)
	}
	return nil
}
