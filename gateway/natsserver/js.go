package natsserver

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsproto"
)

// The JetStream front end: $JS.API.* answered by gateway/jsapi, pull
// consumers as members of their queue group (one member per connection and
// consumer), deliveries with $JS.ACK subjects, acks back to the group.

const (
	maxPullsPerMember = 64    // outstanding pull requests of one member
	maxAckTable       = 16384 // bound of a member's cseq -> handle table
	// interestEvery: how often a member checks that its pull requests'
	// requesters still listen (a request whose inbox is gone is forgotten,
	// as nats-server does, within about twice this).
	interestEvery = 200 * time.Millisecond
	// drainIdle: while the server drains for shutdown, a pull member with
	// no pull request outstanding that has sent no pull request and no ack
	// for this long is taken as stopped (nats.go's Consume then Stop drops
	// what it had buffered, unacked): what it holds goes back to the
	// group, so that the drain does not wait for acks that never come.
	drainIdle = time.Second
)

// handleJSAPI answers a $JS.API publish on its reply subject.
func (c *conn) handleJSAPI(subject, reply, payload []byte) {
	js := c.s.cfg.JetStream
	api := string(subject[len(jsapi.APIPrefix):])
	if rest, ok := strings.CutPrefix(api, "CONSUMER.MSG.NEXT."); ok {
		stream, name, _ := strings.Cut(rest, ".")
		if o := js.Ordered(stream, name); o != nil && len(reply) > 0 {
			if r := c.s.orderedRunner(name); r != nil {
				c.handleOrderedNext(r, string(reply), payload)
				return
			}
		}
		c.handleNext(stream, name, string(reply), payload)
		return
	}
	if rest, ok := strings.CutPrefix(api, "STREAM.MSG.GET."); ok {
		js.Total.Add(1)
		c.handleMsgGet(rest, string(reply), payload)
		return
	}
	if rest, ok := strings.CutPrefix(api, "DIRECT.GET."); ok {
		js.Total.Add(1)
		c.handleDirectGet(rest, string(reply), payload)
		return
	}
	out := js.HandleFrom(api, payload, c.id)
	if len(reply) > 0 {
		c.s.publishCore(nil, string(reply), "", nil, out)
	}
}

// pull is one outstanding pull request.
type pull struct {
	reply     string
	left      int
	leftBytes int // 0: no byte limit
	expires   time.Time
	hb        time.Duration
	lastSent  time.Time
	sent      int
	noWait    bool
}

type ackSlot struct {
	cseq uint64
	at   time.Time
	h    groups.AckHandle
	conn uint64 // the connection the message went to
}

// heldMsg is a delivery that came while no pull request was outstanding
// (credit is lowered asynchronously); it goes out with the next one.
type heldMsg struct {
	cseq           uint64
	subject, reply string
	hdr, payload   []byte
	at             time.Time
}

// jsMember is a connection's member of a consumer's queue group. Its credit
// follows the pull requests: what they still ask for plus what is unacked,
// at most the consumer's max_ack_pending.
type jsMember struct {
	s       *Server
	c       *conn // nil for a push consumer's member (the server's own)
	push    bool  // a push consumer: one endless "pull" on its deliver subject
	cons    *jsapi.Consumer
	id, gid groups.MemberID
	ackWait time.Duration
	maxAck  int
	wake    chan struct{}
	stop    chan struct{}

	// creditMu orders credit changes: a credit is computed and sent to the
	// group under it, so a stale (higher) figure never overtakes a lower one.
	creditMu sync.Mutex

	mu     sync.Mutex
	pulls  []*pull // bound: maxPullsPerMember
	held   []heldMsg
	table  []ackSlot         // ring in delivery order; bound: maxAckTable
	index  map[uint64]uint32 // consumer sequence -> place in table; bound: len(table)
	local  uint64            // deliveries to this member
	credit int
	closed bool
	hdr    []byte    // scratch, under mu
	looked time.Time // last interest check of the pull requests, under mu
	active time.Time // last pull request or ack, under mu
}

// member returns the connection's member of consumer cons, joining the
// group on first use.
func (c *conn) jsMember(cons *jsapi.Consumer) (*jsMember, error) {
	c.s.subsMu.Lock()
	m := c.jsMembers[cons.Name]
	n := len(c.jsMembers)
	c.s.subsMu.Unlock()
	if m != nil && m.cons == cons {
		return m, nil
	}
	if m != nil { // the consumer was deleted and created again
		c.dropJSMember(m)
	}
	if n >= c.s.cfg.MaxSubscriptions {
		return nil, errors.New("maximum subscriptions exceeded")
	}
	size := min(max(2*cons.Config.MaxAckPending, 64), maxAckTable)
	m = &jsMember{s: c.s, c: c, cons: cons, id: c.nextMemberID(), ackWait: cons.Config.AckWait, maxAck: cons.Config.MaxAckPending,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), table: make([]ackSlot, size), active: time.Now()}
	gid, err := c.s.queues.Join(cons.Key, m.id, m, 0)
	if err != nil {
		return nil, err
	}
	m.gid = gid
	c.s.subsMu.Lock()
	c.jsMembers[cons.Name] = m
	c.s.subsMu.Unlock()
	go m.loop()
	return m, nil
}

func (c *conn) dropJSMember(m *jsMember) {
	c.s.subsMu.Lock()
	if c.jsMembers[m.cons.Name] == m {
		delete(c.jsMembers, m.cons.Name)
	}
	c.s.subsMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	c.s.queues.Leave(m.cons.Key, m.id)
}

// handleNext takes a pull request: CONSUMER.MSG.NEXT.<stream>.<consumer>.
func (c *conn) handleNext(stream, name, reply string, body []byte) {
	js := c.s.cfg.JetStream
	if reply == "" {
		return
	}
	cons, apiErr := js.Lookup(stream, name)
	if apiErr != nil {
		c.s.sendStatus(reply, apiErr.Code, apiErr.Description, 0, 0)
		return
	}
	req, err := jsapi.ParseNext(body, cons.Config.MaxRequestBatch)
	if err != nil {
		c.s.stats.BadPulls.Add(1)
		desc := strings.TrimPrefix(err.Error(), jsapi.ErrBadNext.Error()+": ")
		c.s.sendStatus(reply, 409, desc, 0, 0)
		return
	}
	m, err := c.jsMember(cons)
	if err != nil {
		c.s.sendStatus(reply, 409, err.Error(), 0, 0)
		return
	}
	if now, _ := js.Lookup(stream, name); now != cons {
		// Deleted while this member joined: its hook may have run before,
		// and the join may have made the group anew.
		c.dropJSMember(m)
		if now == nil {
			_ = c.s.queues.Remove(cons.Key, isJSMember)
		}
		c.s.sendStatus(reply, 409, "Consumer Deleted", 0, 0)
		return
	}
	now := time.Now()
	p := &pull{reply: reply, left: req.Batch, leftBytes: req.MaxBytes, hb: req.Heartbeat, lastSent: now}
	switch {
	case req.NoWait:
		// What the group can hand over at once: give it a moment.
		p.expires, p.noWait = now.Add(100*time.Millisecond), true
	case req.Expires > 0:
		p.expires = now.Add(req.Expires)
	}
	m.mu.Lock()
	if len(m.pulls) >= maxPullsPerMember {
		old := m.pulls[0]
		m.pulls = m.pulls[1:]
		m.mu.Unlock()
		c.s.sendStatus(old.reply, 409, "Exceeded MaxWaiting", old.left, old.leftBytes)
		m.mu.Lock()
	}
	m.pulls = append(m.pulls, p)
	m.active = now
	m.flushHeldLocked(now)
	m.mu.Unlock()
	m.signal()
}

func (m *jsMember) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// loop keeps the member's credit in step with its pull requests, ends
// expired requests (408) and sends idle heartbeats.
func (m *jsMember) loop() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-m.wake:
		case <-tick.C:
		}
		m.housekeep(time.Now())
	}
}

func (m *jsMember) housekeep(now time.Time) {
	type status struct {
		reply       string
		code        int
		desc        string
		left, bytes int
	}
	var out []status
	m.creditMu.Lock()
	defer m.creditMu.Unlock()
	m.mu.Lock()
	// Requesters that stopped listening (an unsubscribed inbox) are
	// forgotten; a push consumer looks at its deliver subject.
	look := now.Sub(m.looked) >= interestEvery
	if look {
		m.looked = now
	}
	interest := !m.push || m.s.hasInterest(m.pulls[0].reply)
	keep := m.pulls[:0]
	for _, p := range m.pulls {
		switch {
		case p.left <= 0 && !m.push:
		case look && !m.push && !m.s.hasInterest(p.reply):
		case !p.expires.IsZero() && now.After(p.expires):
			code, desc := 408, "Request Timeout"
			if p.noWait {
				code, desc = 404, "No Messages"
			}
			out = append(out, status{p.reply, code, desc, p.left, p.leftBytes})
		default:
			if p.hb > 0 && now.Sub(p.lastSent) >= p.hb {
				p.lastSent = now
				out = append(out, status{p.reply, 100, "Idle Heartbeat", 0, 0})
			}
			keep = append(keep, p)
		}
	}
	clear(m.pulls[len(keep):])
	m.pulls = keep
	// Held messages whose ack_wait has passed are the group's again.
	for len(m.held) > 0 && now.Sub(m.held[0].at) > m.ackWait {
		m.held = m.held[1:]
	}
	m.flushHeldLocked(now)
	var release []groups.AckHandle
	if !m.push && len(m.pulls) == 0 && m.s.draining.Load() && now.Sub(m.active) >= drainIdle {
		release = m.releaseUnackedLocked(release) // a stopped worker
	}
	if !m.push && len(m.pulls) == 0 && len(m.held) > 0 && now.Sub(m.held[0].at) >= heldGrace {
		// A message that came as the last pull ended (credit follows pulls
		// a moment late) goes back to the group for a member that pulls,
		// instead of waiting out its ack_wait here.
		release = m.releaseHeldLocked(release)
	}
	want := m.pullCreditLocked(now)
	if m.push {
		// Credit only while someone listens on the deliver subject; what
		// came after the last one left goes back to the group at once (a
		// held message would stall a shutdown for its whole timeout).
		want = 0
		if interest {
			want = m.maxAck
		}
		if !interest {
			release = m.releaseHeldLocked(release)
		}
		want = min(want+m.unackedLocked(now), m.maxAck)
	}
	change := want != m.credit
	m.credit = want
	m.mu.Unlock()
	if change {
		// Before the statuses: a requester told 408 must not get a message
		// the group sent meanwhile on the old credit.
		_ = m.s.queues.SetCredit(m.cons.Key, m.id, want)
	}
	for _, s := range out {
		m.s.sendStatus(s.reply, s.code, s.desc, s.left, s.bytes)
	}
	for _, h := range release {
		_ = m.s.queues.Ack(groups.Ack{Handle: h, Kind: groups.AckNak})
	}
	if want > 0 && m.cons.Expires() {
		m.s.cfg.JetStream.Touch(m.cons, now)
	}
}

// releaseUnackedLocked empties the held messages and the ack table and
// returns their handles (to be nak'd). Called with mu.
func (m *jsMember) releaseUnackedLocked(hs []groups.AckHandle) []groups.AckHandle {
	clear(m.held)
	m.held = m.held[:0]
	for i := range m.table {
		if s := &m.table[i]; s.cseq != 0 {
			h := s.h
			h.Member = m.gid
			hs = append(hs, h)
			m.clearLocked(s)
		}
	}
	return hs
}

// heldGrace is how long a pull member keeps a message that came with no
// pull outstanding before handing it back to the group.
const heldGrace = 250 * time.Millisecond

// pullCreditLocked is a pull member's credit: what its pull requests still
// ask for plus what it holds unacknowledged, at most max_ack_pending. A
// member that stopped pulling has no credit once it acked everything, so
// the group gives the next message to a member that pulls. Called with mu.
func (m *jsMember) pullCreditLocked(now time.Time) int {
	want := 0
	for _, p := range m.pulls {
		want += p.left
	}
	return min(want+m.unackedLocked(now), m.maxAck)
}

// unackedLocked counts the deliveries within their ack_wait. Called with mu.
func (m *jsMember) unackedLocked(now time.Time) int {
	n := 0
	cut := now.Add(-m.ackWait)
	for i := range m.table {
		if s := &m.table[i]; s.cseq != 0 && s.at.After(cut) {
			n++
		}
	}
	return n
}

// lowerCredit lowers a pull member's credit at once when an answer freed
// some and no pull asks for it, before the answer reaches the group: the
// group would otherwise hand the freed credit's next message to a member
// that no longer pulls (it would wait there for a pull or its ack_wait).
// The caller holds creditMu until it has passed the answer on.
func (m *jsMember) lowerCredit(now time.Time) {
	m.mu.Lock()
	want := m.pullCreditLocked(now)
	lower := want < m.credit
	if lower {
		m.credit = want
	}
	m.mu.Unlock()
	if lower {
		_ = m.s.queues.SetCredit(m.cons.Key, m.id, want)
	}
}

// releaseHeldLocked empties the held messages and returns their handles
// (to be nak'd, so that they go to the group again). Called with mu.
func (m *jsMember) releaseHeldLocked(hs []groups.AckHandle) []groups.AckHandle {
	for i := range m.held {
		if s := m.slotLocked(m.held[i].cseq); s != nil {
			h := s.h
			h.Member = m.gid
			hs = append(hs, h)
			m.clearLocked(s)
		}
		m.held[i] = heldMsg{}
	}
	m.held = m.held[:0]
	return hs
}

// Deliver encodes d for the oldest pull request that wants it. It never
// refuses while the connection is open: a delivery that finds no request
// (credit follows requests with a delay) is held for the next one.
func (m *jsMember) Deliver(d *groups.Delivery) bool {
	rec := d.Record
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	cseq := m.cons.NextSeq()
	m.insertLocked(ackSlot{cseq: cseq, at: now, h: d.Ack})
	meta := jsapi.AckMeta{Stream: m.s.cfg.JetStream.Stream(), Consumer: m.cons.Name, Delivered: d.Deliveries,
		StreamSeq: jsapi.StreamSeq(d.Partition, d.Offset), ConsumerSeq: cseq, Time: rec.Time}
	reply := string(jsapi.AppendAckSubject(nil, &meta))
	m.hdr = appendDeliveryHeader(m.hdr[:0], d)
	h := heldMsg{cseq: cseq, subject: m.s.cfg.TelemetryPrefix + "." + rec.Device, reply: reply, at: now,
		hdr: bytes.Clone(m.hdr), payload: bytes.Clone(rec.Payload)}
	if !m.sendLocked(&h, now) {
		if len(m.held) >= max(m.maxAck, 1) {
			return false // cannot happen while credit bounds in-flight; refuse rather than grow
		}
		m.held = append(m.held, h)
	}
	m.signal()
	return true
}

// sendLocked sends h to the first pull request that still wants a message
// and fits it; false if none does.
func (m *jsMember) sendLocked(h *heldMsg, now time.Time) bool {
	for len(m.pulls) > 0 {
		p := m.pulls[0]
		size := len(h.hdr) + len(h.payload)
		if p.left <= 0 || p.leftBytes > 0 && size > p.leftBytes && p.sent > 0 {
			m.pulls = m.pulls[1:]
			if p.left > 0 {
				go m.s.sendStatus(p.reply, 409, "Message Size Exceeds MaxBytes", p.left, p.leftBytes)
			}
			continue
		}
		// To the request's inbox, under the message's own subject (as
		// nats-server delivers pulled messages).
		var to uint64
		n := m.s.subs.match(p.reply, func(sb *sub) bool {
			if !sb.c.sendMsg(sb, h.subject, h.reply, h.hdr, h.payload) {
				return false
			}
			to = sb.c.id
			return true
		})
		if n == 0 || to == 0 {
			if m.push {
				return false // nobody subscribed to the deliver subject yet: held
			}
			m.pulls = m.pulls[1:] // the requester is gone
			continue
		}
		if s := m.slotLocked(h.cseq); s != nil {
			s.conn = to
		}
		if m.push {
			return true
		}
		p.left--
		p.sent++
		p.lastSent = now
		if p.leftBytes > 0 {
			p.leftBytes = max(p.leftBytes-size, 1)
		}
		if p.left == 0 {
			m.pulls = m.pulls[1:]
		}
		return true
	}
	return false
}

func (m *jsMember) flushHeldLocked(now time.Time) {
	for len(m.held) > 0 && len(m.pulls) > 0 {
		if !m.sendLocked(&m.held[0], now) {
			return
		}
		m.held[0] = heldMsg{}
		m.held = m.held[1:]
	}
}

// handle looks up the delivery cseq names; ok false if the table has no
// such entry (acked already, or overwritten).
func (m *jsMember) handle(cseq uint64, clearIt bool, from uint64) (groups.AckHandle, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.slotLocked(cseq)
	if s == nil || s.conn != from {
		return groups.AckHandle{}, false
	}
	h := s.h
	m.active = time.Now()
	if clearIt {
		m.clearLocked(s)
	} else {
		s.at = m.active
	}
	return h, true
}

// handleJSAck takes a PUB on a $JS.ACK subject: only from the connection
// that holds the message (its member table).
func (c *conn) handleJSAck(subject, reply, payload []byte) error {
	if jsapi.IsQueueAck(subject) {
		q, err := jsapi.ParseQueueAckSubject(subject)
		if err != nil {
			return fmt.Errorf("%w: %v", errBadAck, err)
		}
		return c.ackMember(groups.AckHandle{Group: q.Group, Partition: q.Partition, Offset: q.Meta.ConsumerSeq, Deliveries: q.Meta.Delivered}, q.Member, payload)
	}
	meta, _, consumer, err := jsapi.ParseAckSubject(subject)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadAck, err)
	}
	kind, delay, err := ParseAckPayload(payload)
	if err != nil {
		return err
	}
	c.s.subsMu.Lock()
	m := c.jsMembers[string(consumer)]
	if m == nil {
		m = c.s.pushMembers[string(consumer)]
	}
	c.s.subsMu.Unlock()
	if m == nil {
		c.s.stats.ForeignAcks.Add(1)
		return errNotYourAck
	}
	final := kind != groups.AckInProgress
	if final && !m.push {
		m.creditMu.Lock()
	}
	h, ok := m.handle(meta.ConsumerSeq, final, c.id)
	if ok && final && !m.push {
		m.lowerCredit(time.Now())
	}
	if final && !m.push {
		defer m.creditMu.Unlock()
	}
	if !ok && m.push {
		c.s.stats.ForeignAcks.Add(1)
		return errNotYourAck
	}
	if !ok || h.Deliveries != meta.Delivered {
		return fmt.Errorf("%w: no delivery %d outstanding at consumer %s", errBadAck, meta.ConsumerSeq, consumer)
	}
	h.Member = m.gid
	err = c.s.queues.Ack(groups.Ack{Handle: h, Kind: kind, Delay: delay})
	m.signal()
	if rest, ok := bytes.CutPrefix(bytes.TrimSpace(payload), []byte("+NXT")); ok && len(reply) > 0 && !m.push {
		// +NXT: ack and pull the next message(s) to the reply subject.
		c.handleNext(c.s.cfg.JetStream.Stream(), m.cons.Name, string(reply), bytes.TrimSpace(rest))
	}
	return err
}

// sendStatus sends a JetStream status message (404, 408, 409, 100) to a
// pull request's reply subject.
func (s *Server) sendStatus(reply string, code int, desc string, left, leftBytes int) {
	h, err := natsproto.AppendHeaderStart(nil, code, desc)
	if err != nil {
		h, _ = natsproto.AppendHeaderStart(nil, code, "")
	}
	if code == 408 || code == 409 {
		h, _ = natsproto.AppendHeaderInt(h, "Nats-Pending-Messages", int64(left))
		h, _ = natsproto.AppendHeaderInt(h, "Nats-Pending-Bytes", int64(leftBytes))
	}
	h = natsproto.AppendHeaderEnd(h)
	s.publishCore(nil, reply, "", h, nil)
}

// jsPubAck writes the JetStream part of a pub-ack: "stream" and
// "stream_seq" (the per-node stream sequence), and "duplicate".
func appendJSPubAck(dst []byte, stream string, seq uint64, dup bool) []byte {
	dst = append(dst, `"stream":"`...)
	dst = append(dst, stream...)
	dst = append(dst, `","stream_seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	if dup {
		dst = append(dst, `,"duplicate":true`...)
	}
	return append(dst, ',')
}

// startPush runs the server's member of a push consumer: deliveries go to
// its deliver subject (a core queue group there when deliver_group is set),
// acks are taken from the connection each message went to.
func (s *Server) startPush(cons *jsapi.Consumer) {
	if cons.Config.DeliverSubject == "" {
		return
	}
	m := &jsMember{s: s, push: true, cons: cons, id: groups.MemberID("push-" + cons.Name), ackWait: cons.Config.AckWait,
		maxAck: cons.Config.MaxAckPending, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		table: make([]ackSlot, min(max(2*cons.Config.MaxAckPending, 64), maxAckTable)),
		pulls: []*pull{{reply: cons.Config.DeliverSubject, left: 1}}}
	gid, err := s.queues.Join(cons.Key, m.id, m, 0)
	if err != nil {
		s.logger.Warn("push consumer cannot join its group", "consumer", cons.Name, "err", err)
		return
	}
	m.gid = gid
	s.subsMu.Lock()
	old := s.pushMembers[cons.Name]
	s.pushMembers[cons.Name] = m
	s.subsMu.Unlock()
	if old != nil {
		s.stopPush(old)
	}
	go m.loop()
}

func (s *Server) stopPush(m *jsMember) {
	m.mu.Lock()
	closed := m.closed
	m.closed = true
	m.mu.Unlock()
	if !closed {
		close(m.stop)
		s.queues.Leave(m.cons.Key, m.id)
	}
}

// hasInterest reports whether anyone subscribes to subject.
func (s *Server) hasInterest(subject string) bool {
	return s.subs.match(subject, func(*sub) bool { return false }) > 0
}

// isJSMember reports whether m is a JetStream member (a connection's pull
// member or a push consumer's).
func isJSMember(m groups.Member) bool {
	_, ok := m.(*jsMember)
	return ok
}

// jsHooks are the server's part in consumers' lives (jsapi.Hooks).
func (s *Server) jsHooks() jsapi.Hooks {
	return jsapi.Hooks{
		Created: s.startPush,
		Deleted: s.consumerDeleted,
		Waiting: s.waitingPulls,
		Owned:   isJSMember,

		OrderedCreated: s.orderedCreated,
	}
}

// consumerDeleted drops every member of cons, deleted or expired: waiting
// pull requests get 409 Consumer Deleted, as nats-server answers them.
func (s *Server) consumerDeleted(cons *jsapi.Consumer) {
	s.subsMu.Lock()
	if m := s.pushMembers[cons.Name]; m != nil && m.cons == cons {
		delete(s.pushMembers, cons.Name)
		s.subsMu.Unlock()
		s.stopPush(m)
	} else {
		s.subsMu.Unlock()
	}
	for _, m := range s.pullMembers(cons) {
		m.mu.Lock()
		pulls := m.pulls
		m.pulls = nil
		m.mu.Unlock()
		m.c.dropJSMember(m)
		for _, p := range pulls {
			s.sendStatus(p.reply, 409, "Consumer Deleted", p.left, p.leftBytes)
		}
	}
}

// waitingPulls counts the pull requests outstanding at cons.
func (s *Server) waitingPulls(cons *jsapi.Consumer) int {
	n := 0
	for _, m := range s.pullMembers(cons) {
		m.mu.Lock()
		n += len(m.pulls)
		m.mu.Unlock()
	}
	return n
}

// pullMembers are the connections' members of cons.
func (s *Server) pullMembers(cons *jsapi.Consumer) []*jsMember {
	var ms []*jsMember
	for _, c := range s.conns.All() {
		s.subsMu.Lock()
		if m := c.jsMembers[cons.Name]; m != nil && m.cons == cons {
			ms = append(ms, m)
		}
		s.subsMu.Unlock()
	}
	return ms
}

// insertLocked records a delivery in the ack table, overwriting the oldest
// entry when the ring is full (its ack is then refused as unknown; the
// group redelivers it after ack_wait). Called with mu.
func (m *jsMember) insertLocked(s ackSlot) {
	if m.index == nil {
		m.index = make(map[uint64]uint32, len(m.table))
	}
	m.local++
	pos := uint32(m.local % uint64(len(m.table)))
	if old := &m.table[pos]; old.cseq != 0 {
		delete(m.index, old.cseq)
	}
	m.table[pos] = s
	m.index[s.cseq] = pos
}

// slotLocked finds the entry of consumer sequence cseq; nil if there is
// none (acked already, or overwritten). Called with mu.
func (m *jsMember) slotLocked(cseq uint64) *ackSlot {
	pos, ok := m.index[cseq]
	if !ok {
		return nil
	}
	if s := &m.table[pos]; s.cseq == cseq {
		return s
	}
	return nil
}

// clearLocked removes entry s. Called with mu.
func (m *jsMember) clearLocked(s *ackSlot) {
	delete(m.index, s.cseq)
	*s = ackSlot{}
}
