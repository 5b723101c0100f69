package natsserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsproto"
	"edgeq/gateway/subject"
	"edgeq/wal"
)

// handleOp carries out one client op; false closes the connection.
func (c *conn) handleOp(op *natsproto.Op) bool {
	if op.Kind != natsproto.OpConnect && !c.authed && c.s.authRequired() {
		c.s.stats.AuthFailures.Add(1)
		c.close(ClosedAuthViolation, "operation before CONNECT", errors.New("Authorization Violation"))
		return false
	}
	switch op.Kind {
	case natsproto.OpConnect:
		return c.handleConnect(op)
	case natsproto.OpPing:
		c.write(natsproto.AppendPong(nil))
		return true
	case natsproto.OpPong:
		c.pingsOn.Store(0)
		return true
	case natsproto.OpSub:
		if !c.perms.maySubscribe(string(op.Subject)) {
			c.s.stats.PermViolations.Add(1)
			c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q", op.Subject))
			break
		}
		c.handleSub(op)
	case natsproto.OpUnsub:
		c.handleUnsub(op)
	case natsproto.OpPub, natsproto.OpHPub:
		if !c.perms.mayPublish(string(op.Subject)) {
			c.s.stats.PermViolations.Add(1)
			c.sendErr(fmt.Sprintf("Permissions Violation for Publish to %q", op.Subject))
			break
		}
		c.handlePub(op)
	}
	if c.opts.Verbose {
		c.write(natsproto.AppendOK(nil))
	}
	return true
}

func (c *conn) handleConnect(op *natsproto.Op) bool {
	o, err := natsproto.ParseConnect(op.Connect)
	if err != nil {
		return c.protocolError(err)
	}
	perms, ok := c.s.authenticate(&o)
	if !ok {
		c.s.stats.AuthFailures.Add(1)
		c.close(ClosedAuthViolation, "bad credentials", errors.New("Authorization Violation"))
		return false
	}
	c.Lock()
	c.opts = o
	c.Unlock()
	c.authed = true
	c.perms = perms
	_ = c.nc.SetReadDeadline(timeZero)
	if o.Verbose {
		c.write(natsproto.AppendOK(nil))
	}
	return true
}

func (c *conn) handleSub(op *natsproto.Op) {
	filter := string(op.Subject)
	if err := subject.CheckFilter(filter); err != nil {
		c.sendErr("Invalid Subject")
		return
	}
	sid := string(op.SID)
	c.s.subsMu.Lock()
	_, dup := c.subs[sid]
	n := len(c.subs) + c.retired
	c.s.subsMu.Unlock()
	if dup {
		return // nats-server ignores a repeated sid
	}
	if n >= c.s.cfg.MaxSubscriptions {
		c.sendErr("maximum subscriptions exceeded")
		return
	}
	sb := &sub{c: c, sid: sid, filter: filter, queue: string(op.Queue)}
	prefix := c.s.cfg.TelemetryPrefix
	if groups.IsTelemetryFilter(filter, prefix) {
		if sb.queue != "" {
			sb.group = groups.GroupKey{Filter: filter, Queue: sb.queue}
			// One connection may create only so many groups: each pins
			// retention for group_ttl and counts against queue.max_groups.
			_, _, _, exists := c.s.queues.LocalMembers(sb.group)
			if !exists && c.groupsCreated >= c.s.cfg.MaxGroupsPerConn {
				c.s.stats.GroupsRefused.Add(1)
				c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q: this connection created %d queue groups already (nats.max_groups_per_connection)", filter, c.groupsCreated))
				return
			}
			sb.member = c.nextMemberID()
			gm, err := c.s.queues.Join(sb.group, sb.member, sb, -1)
			if err != nil {
				c.s.logger.Warn("queue subscription refused", "client", c.id, "filter", filter, "queue", sb.queue, "err", err)
				c.sendErr(fmt.Sprintf("Permissions Violation for Subscription to %q: %v", filter, err))
				return
			}
			sb.groupMember, sb.isMem = gm, true
			if !exists {
				c.groupsCreated++
			}
		} else {
			cancel, err := c.s.tail.Subscribe(filter, sb)
			if err != nil {
				c.sendErr("Invalid Subject")
				return
			}
			sb.untail = cancel
		}
	}
	c.s.subsMu.Lock()
	c.subs[sid] = sb
	if sb.isMem {
		c.members[string(sb.groupMember)] = sb
	}
	c.s.subsMu.Unlock()
	c.s.subs.add(sb)
}

func (c *conn) handleUnsub(op *natsproto.Op) {
	c.s.subsMu.Lock()
	sb, ok := c.subs[string(op.SID)]
	c.s.subsMu.Unlock()
	if !ok {
		return
	}
	if op.Max > 0 && sb.delivered.Load() < op.Max {
		sb.max.Store(op.Max)
		return
	}
	c.s.removeSub(sb)
}

// autoUnsub removes a subscription that reached its UNSUB max.
func (s *Server) autoUnsub(sb *sub) { s.removeSub(sb) }

// removeSub ends a subscription on UNSUB (or its auto-unsubscribe max). A
// queue member that still holds messages is retired rather than removed:
// it gets nothing more, but its connection may still answer for what it
// holds, as a JetStream client may ack after unsubscribing (natscli
// `sub --ack --count N` sends UNSUB before acking the last message). It
// leaves its group once it has answered for everything it was sent, when
// its connection closes, or after the group's ack_wait (by then what it
// held goes to other members anyway), whichever comes first.
func (s *Server) removeSub(sb *sub) {
	s.subsMu.Lock()
	cur, ok := sb.c.subs[sb.sid]
	retire := false
	if ok && cur == sb {
		delete(sb.c.subs, sb.sid)
		if sb.isMem {
			if sb.sent.Load() > sb.answered.Load() {
				retire, sb.retired = true, true
				sb.c.retired++
			} else {
				delete(sb.c.members, string(sb.groupMember))
			}
		}
	}
	s.subsMu.Unlock()
	switch {
	case !ok || cur != sb:
	case retire:
		s.subs.remove(sb)
		if err := s.queues.SetCredit(sb.group, sb.member, 0); err != nil {
			s.logger.Debug("pausing an unsubscribed member", "client", sb.c.id, "sid", sb.sid, "err", err)
		}
		s.subsMu.Lock()
		if sb.retired { // not already answered for everything
			sb.retireTimer = time.AfterFunc(s.queues.AckWait(sb.group), func() { s.endRetired(sb) })
		}
		s.subsMu.Unlock()
		if sb.sent.Load() <= sb.answered.Load() {
			s.endRetired(sb)
		}
	default:
		s.dropSub(sb)
	}
}

// endRetired removes a retired member from its connection and its group.
func (s *Server) endRetired(sb *sub) {
	s.subsMu.Lock()
	if sb.retired {
		sb.retired = false
		sb.c.retired--
		if sb.c.members[string(sb.groupMember)] == sb {
			delete(sb.c.members, string(sb.groupMember))
		}
		if sb.retireTimer != nil {
			sb.retireTimer.Stop()
		}
	}
	s.subsMu.Unlock()
	s.dropSub(sb)
}

// dropSub detaches a subscription from core routing, its group and the
// tail. A member leaves its group once.
func (s *Server) dropSub(sb *sub) {
	s.subs.remove(sb)
	if sb.untail != nil {
		sb.untail()
	}
	if sb.isMem && sb.left.CompareAndSwap(false, true) {
		s.queues.Leave(sb.group, sb.member)
	}
}

func (c *conn) handlePub(op *natsproto.Op) {
	c.s.stats.InMsgs.Add(1)
	c.s.stats.InBytes.Add(uint64(len(op.Payload)))
	if !subject.ValidPublish(op.Subject) && !c.isConsumerCreateWithFilter(op.Subject) {
		c.sendErr("Invalid Publish Subject")
		return
	}
	subject := op.Subject
	switch {
	case bytes.HasPrefix(subject, []byte(AckPrefix)):
		if err := c.handleAck(subject, op.Payload); err != nil {
			c.s.stats.BadAcks.Add(1)
			c.s.logger.Debug("acknowledgement refused", "client", c.id, "subject", string(subject), "err", err)
		}
		if len(op.Reply) > 0 { // AckSync waits for an answer
			c.s.publishCore(nil, string(op.Reply), "", nil, nil)
		}
	case c.s.cfg.JetStream != nil && bytes.HasPrefix(subject, []byte(jsapi.APIPrefix)):
		c.handleJSAPI(subject, op.Reply, op.Payload)
	case c.s.cfg.JetStream != nil && bytes.HasPrefix(subject, []byte(jsapi.AckPrefix)):
		if err := c.handleJSAck(subject, op.Reply, op.Payload); err != nil {
			c.s.stats.BadAcks.Add(1)
			c.s.logger.Debug("JetStream acknowledgement refused", "client", c.id, "subject", string(subject), "err", err)
		}
		if len(op.Reply) > 0 && !bytes.HasPrefix(bytes.TrimSpace(op.Payload), []byte("+NXT")) { // AckSync
			c.s.publishCore(nil, string(op.Reply), "", nil, nil)
		}
	case c.s.cfg.JetStream != nil && bytes.HasPrefix(subject, []byte(fcPrefix)):
		c.s.handleFC(string(subject))
	case c.s.cfg.JetStream != nil && c.s.cfg.JetStream.KVPrefix() != "" && bytes.HasPrefix(subject, []byte(c.s.cfg.JetStream.KVPrefix())):
		// A KV put, delete, purge or create: the view is read-only.
		c.s.stats.IngestErrors.Add(1)
		if len(op.Reply) > 0 {
			c.s.publishCore(nil, string(op.Reply), "", nil, appendJSAckError(nil, c.s.cfg.JetStream.KVReadOnly(), nil))
		}
	case bytes.HasPrefix(subject, []byte(RdyPrefix)):
		c.handleRdy(string(subject[len(RdyPrefix):]), op.Payload)
	case c.isTelemetry(subject):
		c.ingest(op)
	default:
		var header []byte
		if op.Kind == natsproto.OpHPub {
			header = op.Header
		}
		n := c.s.publishCore(c, string(subject), string(op.Reply), header, op.Payload)
		if n == 0 && len(op.Reply) > 0 && c.opts.NoResponders {
			// A request nobody can answer: tell the requester at once, as
			// nats-server does, instead of letting it wait out its timeout.
			c.s.publishCore(nil, string(op.Reply), "", noResponders, nil)
		}
	}
}

// consumerCreate is the JetStream API subject that carries a filter.
const consumerCreate = jsapi.APIPrefix + "CONSUMER.CREATE."

// isConsumerCreateWithFilter reports whether subj is
// $JS.API.CONSUMER.CREATE.<stream>.<consumer>.<filter> with JetStream on:
// the one publish subject that may hold wildcards, since clients put the
// consumer's filter_subject there (nats.go and nats.js talking to a 2.9+
// server; nats-server checks literal subjects only in pedantic mode). The
// stream and consumer tokens stay literal; the filter is a valid filter.
func (c *conn) isConsumerCreateWithFilter(subj []byte) bool {
	if c.s.cfg.JetStream == nil || !bytes.HasPrefix(subj, []byte(consumerCreate)) {
		return false
	}
	rest := subj[len(consumerCreate):]
	stream := bytes.IndexByte(rest, '.')
	if stream < 0 {
		return false
	}
	consumer := bytes.IndexByte(rest[stream+1:], '.')
	if consumer < 0 {
		return false
	}
	names, filter := rest[:stream+1+consumer], rest[stream+1+consumer+1:]
	return subject.ValidPublish(names) && !bytes.ContainsAny(names, "*>") && subject.ValidFilter(filter)
}

func (c *conn) isTelemetry(subject []byte) bool {
	p := c.s.cfg.TelemetryPrefix
	return len(subject) > len(p) && subject[len(p)] == '.' && string(subject[:len(p)]) == p
}

// handleRdy sets a queue member's credit: PUB $EQ.RDY.<sid> <n>.
func (c *conn) handleRdy(sid string, payload []byte) {
	n, err := strconv.Atoi(strings.TrimSpace(string(payload)))
	c.s.subsMu.Lock()
	sb, ok := c.subs[sid]
	c.s.subsMu.Unlock()
	switch {
	case err != nil || n < 0:
		c.sendErr(fmt.Sprintf("Permissions Violation for Publish to %q: credit must be a number >= 0", RdyPrefix+sid))
	case !ok || !sb.isMem:
		c.sendErr(fmt.Sprintf("Permissions Violation for Publish to %q: no queue subscription with that sid", RdyPrefix+sid))
	default:
		if err := c.s.queues.SetCredit(sb.group, sb.member, n); err != nil {
			c.s.logger.Warn("credit change refused", "client", c.id, "sid", sid, "err", err)
		}
	}
}

// ingest stores a telemetry publish and answers its reply subject once the
// record is durable. With JetStream on, the log is a stream over every
// telemetry subject, so a refused publish is answered in JetStream's error
// shape ({"error":{"code":..,"err_code":..,"description":..}}, as
// nats-server answers) and JetStream clients report its description; with
// JetStream off it is {"error":"..."}.
func (c *conn) ingest(op *natsproto.Op) {
	device := string(op.Subject[len(c.s.cfg.TelemetryPrefix)+1:])
	reply := string(op.Reply)
	js := c.s.cfg.JetStream
	refuse := func(e *jsapi.APIError) {
		c.s.stats.IngestErrors.Add(1)
		if reply != "" {
			if js != nil {
				c.s.publishCore(nil, reply, "", nil, appendJSAckError(nil, e, nil))
				return
			}
			c.s.publishCore(nil, reply, "", nil, appendAckError(nil, errors.New(e.Description)))
			return
		}
		// Without a reply the client hears of it as a (non-fatal) -ERR; nats
		// clients keep the connection for permission errors only.
		c.sendErr(fmt.Sprintf("Permissions Violation for Publish to %q: %s", string(op.Subject), e.Description))
	}
	var msgID string
	if js != nil && bytes.Contains(op.Header, []byte("Nats-")) {
		if h, err := natsproto.ParseHeader(op.Header, natsproto.DefaultHeaderLimits()); err == nil {
			if v, ok := h.Get("Nats-Expected-Stream"); ok && string(v) != js.Stream() {
				refuse(jsapi.Err(400, jsapi.CodeStreamMismatch, "expected stream does not match"))
				return
			}
			for _, k := range []string{"Nats-Expected-Last-Sequence", "Nats-Expected-Last-Subject-Sequence", "Nats-Expected-Last-Msg-Id"} {
				if _, ok := h.Get(k); ok {
					refuse(jsapi.Err(400, jsapi.CodeBadRequest, "edgeq: %s is not supported (the stream is a partitioned log)", k))
					return
				}
			}
			if v, ok := h.Get("Nats-Msg-Id"); ok && len(v) > 0 {
				msgID = string(v)
			}
		}
	}
	if err := wal.ValidateDeviceID(device); err != nil {
		c.s.stats.BadDevice.Add(1)
		refuse(jsapi.Err(400, jsapi.CodeBadRequest, "edgeq: subject %s: %v (publish to %s.<device>, the device ID one token of 1-%d bytes)",
			op.Subject, err, c.s.cfg.TelemetryPrefix, wal.MaxDeviceIDLen))
		return
	}
	rec := &wal.Record{Device: device, Source: "nats", Payload: bytes.Clone(op.Payload)}
	if rec.Payload == nil {
		rec.Payload = []byte{}
	}
	if len(op.Header) > 0 { // nil for PUB and for HPUB with a header size of 0
		h, err := natsproto.ParseHeader(op.Header, natsproto.DefaultHeaderLimits())
		if err != nil {
			refuse(jsapi.Err(400, jsapi.CodeBadRequest, "edgeq: bad header block: %v", err))
			return
		}
		for k, v := range h.All() {
			if len(rec.Headers) >= wal.MaxHeaders {
				refuse(jsapi.Err(400, jsapi.CodeBadRequest, "edgeq: more than %d headers", wal.MaxHeaders))
				return
			}
			rec.Headers = append(rec.Headers, wal.Header{Key: string(k), Value: string(v)})
		}
	}
	// Without a reply subject nobody waits for durability: the record
	// rides on the next commit round (wal.Record.NoWait).
	rec.NoWait = reply == ""
	s := c.s
	stream := ""
	if js != nil {
		stream = js.Stream()
	}
	answer := func(pos wal.Position, dup bool) {
		if reply != "" {
			s.publishCore(nil, reply, "", nil, appendPubAck(nil, s.cfg.NodeID, pos, stream, dup))
		}
	}
	dedup := s.cfg.Dedup
	if msgID != "" && dedup != nil {
		// The key is the device's subject and the ID: JetStream's window is per stream,
		// and a stream subject names the device.
		msgID = device + " " + msgID
		if !dedup.Begin(msgID, func(v any) {
			if pos, ok := v.(wal.Position); ok {
				answer(pos, true)
			} else if reply != "" {
				s.publishCore(nil, reply, "", nil, appendJSAckError(nil, jsapi.Err(503, jsapi.CodeBadRequest, "first publish of this Nats-Msg-Id failed; retry"), nil))
			}
		}) {
			return
		}
	}
	s.ingest.AppendAsync(rec, func(pos wal.Position, err error) {
		if err != nil {
			if msgID != "" && dedup != nil {
				dedup.Done(msgID, nil)
			}
			s.stats.IngestErrors.Add(1)
			if reply != "" {
				if js != nil {
					s.publishCore(nil, reply, "", nil, appendJSAckError(nil, jsapi.Err(503, jsapi.CodeStoreFailed, "%v", err), nil))
				} else {
					s.publishCore(nil, reply, "", nil, appendAckError(nil, err))
				}
			}
			return
		}
		if msgID != "" && dedup != nil {
			dedup.Done(msgID, pos)
		}
		s.stats.Ingested.Add(1)
		answer(pos, false)
	})
}

// appendPubAck writes {"node":..,"partition":..,"offset":..,"seq":..}, with
// JetStream enabled preceded by "stream", "stream_seq" and "duplicate" (so
// that JetStream clients parse it; their PubAck.Sequence is then edgeq's
// "seq", the per-device sequence: docs/jetstream.md). The node ID has the
// device-ID alphabet and stream names are checked, so neither needs JSON
// escaping.
func appendPubAck(dst []byte, node string, pos wal.Position, stream string, dup bool) []byte {
	dst = append(dst, '{')
	if stream != "" {
		dst = appendJSPubAck(dst, stream, jsapi.StreamSeq(pos.Partition, pos.Offset), dup)
	}
	dst = append(dst, `"node":"`...)
	dst = append(dst, node...)
	dst = append(dst, `","partition":`...)
	dst = strconv.AppendInt(dst, int64(pos.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendUint(dst, pos.Offset, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, pos.Seq, 10)
	return append(dst, '}')
}

// appendJSAckError writes a JetStream error answer to a publish; e nil
// makes a 503 of err.
func appendJSAckError(dst []byte, e *jsapi.APIError, err error) []byte {
	if e == nil {
		e = jsapi.Err(503, jsapi.CodeBadRequest, "%v", err)
	}
	b, _ := json.Marshal(struct {
		Error *jsapi.APIError `json:"error"`
	}{e})
	return append(dst, b...)
}

func appendAckError(dst []byte, err error) []byte {
	msg, _ := json.Marshal(err.Error())
	dst = append(dst, `{"error":`...)
	dst = append(dst, msg...)
	return append(dst, '}')
}

var timeZero time.Time
