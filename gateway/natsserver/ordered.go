package natsserver

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsproto"
)

// Ordered consumers (ack none) on the wire: a runner per consumer reads the
// log through jsapi.Ordered and sends what pull requests ask for (nats.go's
// OrderedConsumer, `nats sub --stream`), or, with a deliver subject, pushes
// with flow control and idle heartbeats (nats.go's KV Watch and legacy
// OrderedConsumer). Nothing is acknowledged and no queue group is involved.
// A message the connection cannot take (slow consumer) is skipped: the
// client sees a gap in the consumer sequence and resets, as against
// nats-server.

const (
	// fcEvery: a push consumer with flow control asks for a reply after
	// this many messages and sends no more until it comes.
	fcEvery = 512
	// orderedBatch: most messages one read takes.
	orderedBatch = 256
	// fcPrefix starts flow-control reply subjects: $JS.FC.<stream>.<consumer>.<n>.
	fcPrefix = "$JS.FC."
)

type orderedRunner struct {
	s    *Server
	o    *jsapi.Ordered
	push bool
	hb   time.Duration // push: idle heartbeat
	fc   bool          // push: flow control
	kick chan struct{}

	mu       sync.Mutex
	pulls    []*pull // bound: maxPullsPerMember
	fcReply  string  // push: the flow-control request not answered yet
	fcCount  int     // push: messages since the last flow-control request
	fcSeq    uint64
	lastSent time.Time

	hdr []byte // header scratch of the runner goroutine (sendTo)
}

// orderedCreated starts serving a new ordered consumer.
func (s *Server) orderedCreated(o *jsapi.Ordered) {
	r := &orderedRunner{s: s, o: o, push: o.Config.DeliverSubject != "", hb: o.Config.IdleHeartbeat, fc: o.Config.FlowControl,
		kick: make(chan struct{}, 1), lastSent: time.Now()}
	s.subsMu.Lock()
	s.orderedRunners[o.Name] = r
	s.subsMu.Unlock()
	go r.loop()
}

func (s *Server) orderedRunner(name string) *orderedRunner {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	return s.orderedRunners[name]
}

func (r *orderedRunner) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *orderedRunner) loop() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.o.Wake:
		case <-r.kick:
		case <-tick.C:
		}
		if r.o.Gone() {
			r.end()
			return
		}
		r.serve(time.Now())
	}
}

// end answers waiting pulls (409 Consumer Deleted) and forgets the runner.
func (r *orderedRunner) end() {
	r.s.subsMu.Lock()
	if r.s.orderedRunners[r.o.Name] == r {
		delete(r.s.orderedRunners, r.o.Name)
	}
	r.s.subsMu.Unlock()
	r.mu.Lock()
	pulls := r.pulls
	r.pulls = nil
	r.mu.Unlock()
	for _, p := range pulls {
		r.s.sendStatus(p.reply, 409, "Consumer Deleted", p.left, p.leftBytes)
	}
}

// serve sends what can go now: to pull requests, or pushed.
func (r *orderedRunner) serve(now time.Time) {
	if r.push {
		r.servePush(now)
		return
	}
	r.mu.Lock()
	keep := r.pulls[:0]
	for _, p := range r.pulls {
		switch {
		case p.left <= 0:
		case !r.s.hasInterest(p.reply):
		case !p.expires.IsZero() && now.After(p.expires):
			code, desc := 408, "Request Timeout"
			if p.noWait {
				code, desc = 404, "No Messages"
			}
			go r.s.sendStatus(p.reply, code, desc, p.left, p.leftBytes)
		default:
			keep = append(keep, p)
		}
	}
	clear(r.pulls[len(keep):])
	r.pulls = keep
	if len(r.pulls) > 0 {
		r.o.Touch(now)
	}
	r.mu.Unlock()
	// Read and send without the lock: the connection's reader takes it to
	// add a pull request. Only this goroutine changes a pull's counts.
	for {
		r.mu.Lock()
		if len(r.pulls) == 0 {
			r.mu.Unlock()
			break
		}
		p := r.pulls[0]
		left, leftBytes, reply, noWait := p.left, p.leftBytes, p.reply, p.noWait
		r.mu.Unlock()
		msgs, err := r.o.Next(min(left, orderedBatch), leftBytes)
		if err != nil {
			r.s.logger.Warn("ordered consumer read", "consumer", r.o.Name, "err", err)
		}
		for i := range msgs {
			size := r.sendTo(reply, &msgs[i])
			left--
			if leftBytes > 0 {
				leftBytes = max(leftBytes-size, 1)
			}
		}
		done := left <= 0
		if !done && len(msgs) == 0 {
			if !noWait || r.o.More() {
				break
			}
			done = true
			go r.s.sendStatus(reply, 404, "No Messages", left, leftBytes)
		}
		r.mu.Lock()
		p.left, p.leftBytes = left, leftBytes
		if len(msgs) > 0 {
			p.sent += len(msgs)
			p.lastSent = now
		}
		if done {
			if i := slices.Index(r.pulls, p); i >= 0 {
				r.pulls = slices.Delete(r.pulls, i, i+1)
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	for _, p := range r.pulls {
		if p.hb > 0 && now.Sub(p.lastSent) >= p.hb {
			p.lastSent = now
			go r.s.sendStatus(p.reply, 100, "Idle Heartbeat", 0, 0)
		}
	}
	more := len(r.pulls) > 0
	r.mu.Unlock()
	if more && r.o.More() {
		r.signal()
	}
}

func (r *orderedRunner) servePush(now time.Time) {
	to := r.o.Config.DeliverSubject
	if !r.s.hasInterest(to) {
		return // not in use: inactive_threshold runs
	}
	r.o.Touch(now)
	r.mu.Lock()
	stalled := r.fcReply != ""
	r.mu.Unlock()
	if !stalled {
		// Read and send without the lock (the connection's reader takes it
		// for a flow-control answer); only this goroutine sends.
		msgs, err := r.o.Next(orderedBatch, 0)
		if err != nil {
			r.s.logger.Warn("ordered consumer read", "consumer", r.o.Name, "err", err)
		}
		for i := range msgs {
			r.sendTo(to, &msgs[i])
		}
		r.mu.Lock()
		if len(msgs) > 0 {
			r.lastSent = now
			r.fcCount += len(msgs)
		}
		if r.fc && r.fcCount >= fcEvery {
			r.fcSeq++
			r.fcCount = 0
			r.fcReply = fcPrefix + r.o.Config.Name + "." + strconv.FormatUint(r.fcSeq, 10)
			h, _ := natsproto.AppendHeaderStart(nil, 100, "FlowControl Request")
			r.s.publishCore(nil, to, r.fcReply, natsproto.AppendHeaderEnd(h), nil)
			r.lastSent = now
		} else if len(msgs) > 0 {
			r.signal()
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hb > 0 && now.Sub(r.lastSent) >= r.hb {
		r.lastSent = now
		cseq, sseq := r.o.Last()
		h, _ := natsproto.AppendHeaderStart(nil, 100, "Idle Heartbeat")
		h, _ = natsproto.AppendHeaderInt(h, "Nats-Last-Consumer", int64(cseq))
		h, _ = natsproto.AppendHeaderInt(h, "Nats-Last-Stream", int64(sseq))
		if r.fcReply != "" {
			h, _ = natsproto.AppendHeaderField(h, "Nats-Consumer-Stalled", r.fcReply)
		}
		r.s.publishCore(nil, to, "", natsproto.AppendHeaderEnd(h), nil)
	}
}

// sendTo sends m to subject (a pull request's inbox or the deliver
// subject) under the message's own subject, with a JetStream reply that
// carries its metadata; it returns the size counted against max_bytes.
func (r *orderedRunner) sendTo(subject string, m *jsapi.Msg) int {
	rec := &m.Entry.Record
	meta := jsapi.AckMeta{Stream: m.Stream, Consumer: r.o.Name, Delivered: 1, StreamSeq: m.Seq, ConsumerSeq: m.ConsumerSeq,
		Time: rec.Time, Pending: m.Pending}
	reply := string(jsapi.AppendAckSubject(nil, &meta))
	d := groups.Delivery{Record: rec, Node: r.s.cfg.NodeID, Partition: m.Partition, Offset: m.Entry.Offset}
	// The scratch is the runner goroutine's; sendMsg copies it out.
	r.hdr = appendDeliveryHeader(r.hdr[:0], &d)
	hdr := r.hdr
	payload := rec.Payload
	if r.o.Config.HeadersOnly {
		payload = nil
	}
	// Under the message's own subject, as nats-server delivers.
	r.s.subs.match(subject, func(sb *sub) bool { return sb.c.sendMsg(sb, m.Subject, reply, hdr, payload) })
	return len(hdr) + len(payload)
}

// handleOrderedNext takes a pull request for ordered consumer o.
func (c *conn) handleOrderedNext(r *orderedRunner, reply string, body []byte) {
	req, err := jsapi.ParseNext(body, r.o.Config.MaxRequestBatch)
	if err != nil {
		c.s.stats.BadPulls.Add(1)
		c.s.sendStatus(reply, 409, strings.TrimPrefix(err.Error(), jsapi.ErrBadNext.Error()+": "), 0, 0)
		return
	}
	if r.push {
		c.s.sendStatus(reply, 409, "Consumer is push based", 0, 0)
		return
	}
	now := time.Now()
	p := &pull{reply: reply, left: req.Batch, leftBytes: req.MaxBytes, hb: req.Heartbeat, lastSent: now}
	switch {
	case req.NoWait:
		p.noWait = true
		p.expires = now.Add(100 * time.Millisecond)
	case req.Expires > 0:
		p.expires = now.Add(req.Expires)
	}
	r.o.Touch(now)
	r.mu.Lock()
	if len(r.pulls) >= maxPullsPerMember {
		old := r.pulls[0]
		r.pulls = r.pulls[1:]
		go c.s.sendStatus(old.reply, 409, "Exceeded MaxWaiting", old.left, old.leftBytes)
	}
	r.pulls = append(r.pulls, p)
	r.mu.Unlock()
	r.signal()
}

// handleFC takes the answer to a flow-control request.
func (s *Server) handleFC(subject string) {
	rest := strings.TrimPrefix(subject, fcPrefix)
	name, _, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	r := s.orderedRunner(name)
	if r == nil {
		return
	}
	r.mu.Lock()
	match := r.fcReply == subject
	if match {
		r.fcReply = ""
	}
	r.mu.Unlock()
	if match {
		r.signal()
	}
}
