package natsserver

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsproto"
	"edgeq/internal/connset"
)

// conn is one client connection: a reader goroutine that parses and handles
// ops, and a writer goroutine that flushes the output buffer and pings.
type conn struct {
	s      *Server
	id     uint64
	nc     net.Conn
	parser *natsproto.Parser
	opts   natsproto.ConnectOptions
	authed bool
	perms  *Permissions // the user's; nil: everything (reader goroutine only)

	// The outbox's lock also guards the scratch buffers below and nc
	// (a TLS upgrade replaces it). Its Out is bound by cfg.MaxPending.
	connset.Outbox
	pingsOn atomic.Int32

	subs      map[string]*sub      // by sid; guarded by Server.subsMu; bound: cfg.MaxSubscriptions
	members   map[string]*sub      // queue subscriptions by group member ID, retired ones too; guarded by Server.subsMu; bound: as subs
	retired   int                  // members unsubscribed but still holding messages; guarded by Server.subsMu; they count against cfg.MaxSubscriptions
	memberSeq uint64               // reader goroutine only
	jsMembers map[string]*jsMember // pull-consumer members by consumer name; guarded by Server.subsMu; bound: cfg.MaxSubscriptions

	// Scratch for encoding deliveries, guarded by mu.
	subjBuf, replyBuf, hdrBuf []byte
	// groupsCreated counts the queue groups this connection's subscribes
	// created (reader goroutine only); bound: cfg.MaxGroupsPerConn.
	groupsCreated int
}

// sub is one subscription. Its fields are set before it is shared and not
// changed after; counters are atomic.
type sub struct {
	c      *conn
	sid    string
	filter string
	queue  string

	group       groups.GroupKey // set for queue-group members
	member      groups.MemberID // the connection's name for it
	groupMember groups.MemberID // its ID in the group (deliveries' AckHandle.Member)
	isMem       bool
	untail      func() // live-tail cancel, nil when not tailing

	max       atomic.Int64 // auto-unsubscribe after this many messages (0: none)
	delivered atomic.Int64

	// A queue member's deliveries and final answers (ack, nak, term) from
	// its connection: after an UNSUB the member is retired, not gone, while
	// sent > answered (see retire).
	sent, answered atomic.Int64
	retired        bool        // unsubscribed, still answering; guarded by Server.subsMu
	left           atomic.Bool // Leave was called
	retireTimer    *time.Timer // guarded by Server.subsMu
}

func newConn(s *Server, id uint64, nc net.Conn) *conn {
	p, _ := natsproto.NewParser(natsproto.Limits{
		MaxControlLine: s.cfg.MaxControlLine,
		MaxPayload:     s.cfg.MaxPayload,
		ScratchRetain:  16 << 10,
	})
	c := &conn{s: s, id: id, nc: nc, parser: p, subs: map[string]*sub{},
		members: map[string]*sub{}, jsMembers: map[string]*jsMember{}, opts: natsproto.ConnectOptions{Echo: true}}
	c.Init()
	return c
}

func (c *conn) serve() {
	infoSent := false
	if c.s.cfg.TLS != nil {
		var ok bool
		if infoSent, ok = c.upgradeTLS(); !ok {
			c.close(ClosedTLSHandshake, "", nil)
			c.s.conns.Remove(c.id)
			return
		}
	}
	writerDone := make(chan struct{})
	go c.writer(writerDone)
	defer func() {
		c.close(ClosedByClient, "", nil)
		<-writerDone
		c.cleanup()
		c.s.conns.Remove(c.id)
	}()
	if !infoSent {
		c.write(c.s.info(c))
	}
	if c.s.authRequired() {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.AuthTimeout))
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			if !c.handleInput(buf[:n]) {
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !c.authed {
				c.s.stats.AuthFailures.Add(1)
				c.close(ClosedAuthTimeout, "", errors.New("Authentication Timeout"))
			}
			return
		}
	}
}

// handleInput parses one read and handles its ops; false closes the connection.
func (c *conn) handleInput(b []byte) bool {
	if err := c.parser.Feed(b); err != nil {
		return c.protocolError(err)
	}
	for {
		op, ok, err := c.parser.Next()
		if err != nil {
			return c.protocolError(err)
		}
		if !ok {
			return true
		}
		if !c.handleOp(&op) {
			return false
		}
	}
}

func (c *conn) protocolError(err error) bool {
	c.s.stats.ProtocolErrors.Add(1)
	text, closeConn, ok := natsproto.ClientError(err)
	if !ok {
		text, closeConn = "Parser Error", true
	}
	c.s.logger.Debug("protocol error", "client", c.id, "err", err)
	if closeConn {
		c.close(ClosedProtocolError, text, errors.New(text))
		return false
	}
	c.sendErr(text)
	return true
}

// write queues protocol output that must not be dropped (INFO, PONG, +OK,
// -ERR); it counts against the pending limit like messages do.
func (c *conn) write(b []byte) { c.Append(b) }

func (c *conn) sendErr(text string) { c.write(natsproto.AppendErr(nil, text)) }

// sendMsg queues a message for sb. It never blocks: a connection whose
// pending output would pass the limit is closed as a slow consumer and the
// message is refused (a queue group then gives it to another member).
func (c *conn) sendMsg(sb *sub, subject, reply string, header, payload []byte) bool {
	size := len(subject) + len(reply) + len(sb.sid) + len(header) + len(payload) + 48
	c.Lock()
	if !c.reserve(size) {
		c.Unlock()
		return false
	}
	if header != nil && c.opts.Headers {
		c.Out = natsproto.AppendHMsg(c.Out, subject, sb.sid, reply, header, payload)
	} else {
		c.Out = natsproto.AppendMsg(c.Out, subject, sb.sid, reply, payload)
	}
	c.Signal()
	c.Unlock()
	c.sent(sb, len(payload))
	return true
}

// sendDelivery encodes a queue-group or live-tail delivery for sb into the
// output buffer: the subject <prefix>.<device>, the ack subject of its
// handle, and the Edgeq-* header block, built in the connection's scratch
// buffers (no allocation per message).
func (c *conn) sendDelivery(sb *sub, d *groups.Delivery) bool {
	rec := d.Record
	c.Lock()
	c.subjBuf = append(append(append(c.subjBuf[:0], c.s.cfg.TelemetryPrefix...), '.'), rec.Device...)
	c.replyBuf = c.replyBuf[:0]
	switch {
	case d.Ack.IsZero():
	case c.s.cfg.QueueJSAcks && c.s.cfg.JetStream != nil:
		q := jsapi.QueueAck{Meta: jsapi.AckMeta{Stream: c.s.cfg.JetStream.Stream(), Consumer: sb.queue, Delivered: d.Deliveries,
			StreamSeq: jsapi.StreamSeq(d.Partition, d.Offset), ConsumerSeq: d.Offset, Time: rec.Time},
			Group: d.Ack.Group, Member: []byte(d.Ack.Member), Partition: d.Ack.Partition}
		c.replyBuf = jsapi.AppendQueueAckSubject(c.replyBuf, &q)
	default:
		c.replyBuf = appendAckSubject(c.replyBuf, d.Ack)
	}
	c.hdrBuf = appendDeliveryHeader(c.hdrBuf[:0], d)
	size := len(c.subjBuf) + len(c.replyBuf) + len(sb.sid) + len(c.hdrBuf) + len(rec.Payload) + 48
	if !c.reserve(size) {
		c.Unlock()
		return false
	}
	subject, reply := unsafeString(c.subjBuf), unsafeString(c.replyBuf)
	if c.opts.Headers {
		c.Out = natsproto.AppendHMsg(c.Out, subject, sb.sid, reply, c.hdrBuf, rec.Payload)
	} else {
		c.Out = natsproto.AppendMsg(c.Out, subject, sb.sid, reply, rec.Payload)
	}
	c.Signal()
	c.Unlock()
	c.sent(sb, len(rec.Payload))
	return true
}

// reserve checks that size more bytes fit the pending limit; otherwise the
// connection is closed at once as a slow consumer (the socket work happens
// elsewhere: the caller may be a queue group's goroutine). Called with mu.
func (c *conn) reserve(size int) bool {
	if c.Closed {
		return false
	}
	if len(c.Out)+size <= c.s.cfg.MaxPending {
		return true
	}
	c.Closed = true
	c.Signal()
	go c.finishClose(ClosedSlowConsumer, "pending bytes over max_pending", errors.New("Slow Consumer"))
	return false
}

// sent counts a queued message and applies an UNSUB max.
func (c *conn) sent(sb *sub, payload int) {
	c.s.stats.OutMsgs.Add(1)
	c.s.stats.OutBytes.Add(uint64(payload))
	if sb.group.Queue != "" { // set before Join; isMem only after it
		sb.sent.Add(1)
	}
	if max := sb.max.Load(); max > 0 && sb.delivered.Add(1) >= max {
		// Auto-unsubscribe reached: leave outside this call (a queue group
		// may be calling us).
		go c.s.autoUnsub(sb)
	}
}

// writer flushes output and pings the client.
func (c *conn) writer(done chan<- struct{}) {
	defer close(done)
	ping := time.NewTicker(c.s.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-c.Wake():
		case <-ping.C:
			if c.pingsOn.Add(1) > int32(c.s.cfg.MaxPingsOut) {
				c.close(ClosedStale, "pings unanswered", errors.New("Stale Connection"))
				return
			}
			c.write(natsproto.AppendPing(nil))
			continue
		}
		// nc is set for good before the writer starts (after a TLS upgrade).
		closed, err := c.Flush(c.nc, c.s.cfg.WriteDeadline, nil)
		if err != nil {
			if connset.TimedOut(err) {
				c.close(ClosedWriteTimeout, "write deadline exceeded", nil)
			} else {
				c.close(ClosedWriteError, err.Error(), nil)
			}
			return
		}
		if closed {
			return
		}
	}
}

// close marks the connection closed, sends -ERR when errText is set, and closes
// the socket; the reader goroutine then cleans up. Safe to call many times:
// the first reason is the one counted.
func (c *conn) close(reason CloseReason, detail string, errText error) {
	if c.Close() {
		c.finishClose(reason, detail, errText)
	}
}

// finishClose counts the reason, sends the -ERR (best effort, bounded) and
// closes the socket.
func (c *conn) finishClose(reason CloseReason, detail string, errText error) {
	c.s.stats.closes.Add(reason)
	c.Lock()
	nc := c.nc // a TLS upgrade replaces it
	c.Unlock()
	if errText != nil {
		_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = nc.Write(natsproto.AppendErr(nil, errText.Error()))
	}
	if reason != ClosedByClient {
		c.s.logger.Info("closing client connection", "client", c.id, "name", c.opts.Name, "remote", nc.RemoteAddr().String(),
			"reason", reason.String(), "detail", detail)
	}
	_ = nc.Close()
}

// cleanup removes every subscription: queue members leave their groups (their
// in-flight messages go to other members), tails stop, core subs go.
func (c *conn) cleanup() {
	c.s.subsMu.Lock()
	subs := c.subs
	for _, sb := range c.members {
		if sb.retired {
			sb.retired = false
			if sb.retireTimer != nil {
				sb.retireTimer.Stop()
			}
			subs["retired "+string(sb.groupMember)] = sb
		}
	}
	c.subs = map[string]*sub{}
	c.members = map[string]*sub{}
	c.retired = 0
	jsm := make([]*jsMember, 0, len(c.jsMembers))
	for _, m := range c.jsMembers {
		jsm = append(jsm, m)
	}
	c.s.subsMu.Unlock()
	for _, sb := range subs {
		c.s.dropSub(sb)
	}
	for _, m := range jsm {
		c.dropJSMember(m)
	}
	if c.s.cfg.JetStream != nil {
		c.s.cfg.JetStream.DropOrdered(c.id)
	}
}

func (c *conn) nextMemberID() groups.MemberID {
	c.memberSeq++
	return groups.MemberID(fmt.Sprintf("c%d-%d", c.id, c.memberSeq))
}
