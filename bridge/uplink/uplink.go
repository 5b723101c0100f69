// Package uplink forwards the node's telemetry to an upstream engine
// (JetStream, an HTTP endpoint, an MQTT broker): store and forward. An uplink
// is a member of a declared queue group inside the node; the group keeps
// per-device order (never two records of one device in flight), retention
// (its committed offsets hold the log) and redelivery. The uplink acks a
// record to the group only after the upstream acknowledged it, naks it with
// a jittered backoff when the upstream failed, and terms it (dead letter)
// when the upstream refused it for good.
package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/time/rate"

	"edgeq/gateway/apiv1"
	"edgeq/gateway/groups"
	"edgeq/internal/backoff"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// Item is one record held by the uplink: a copy of the delivery.
type Item struct {
	Device     string
	Seq        uint64
	Time       int64 // ingest time, unix ns
	Source     string
	Headers    []wal.Header
	Payload    []byte
	Node       string // the node whose log stores it
	Partition  int
	Offset     uint64
	Deliveries int
	Maybe      bool // may have been delivered before (a crash or failover)

	handle groups.AckHandle
}

// MsgID is the record's identity upstream, stable across retries and
// restarts: node:device:seq.
func (it *Item) MsgID() string {
	return it.Node + ":" + it.Device + ":" + fmt.Sprint(it.Seq)
}

// Outcome is what the upstream said about one record.
type Outcome uint8

// Outcomes of a send.
const (
	OK        Outcome = iota // acknowledged upstream
	Retry                    // failed; send again later
	Permanent                // refused for good: dead letter
	// Back: not sent, handed back at once (a nak without delay) so that the
	// group sends it again in order (natsup.go); not an upstream failure.
	Back
)

// Result is the outcome of one record of a batch; Err says why for Retry
// and Permanent.
type Result struct {
	Outcome Outcome
	Err     error
	// RetryAfter is how long the upstream asked the uplink to wait before
	// it sends again (an HTTP Retry-After on a 429 or 503); 0: not asked.
	RetryAfter time.Duration
	// Skipped (with OK): not sent, the upstream already held it.
	Skipped bool
}

// Transport is an upstream connection. It also implements BatchSender or
// Pipeliner, which say how records go out.
type Transport interface {
	// Connected reports whether the upstream connection is up (HTTP: the
	// last request reached the server).
	Connected() bool
	Close()
}

// BatchSender sends batches: Send returns when every record of the batch
// has an outcome (res has len(batch) entries); it respects ctx and the
// uplink's timeout itself. A BatchSender whose batches succeed or fail as a
// whole (an HTTP POST) also has a method atomicBatches.
type BatchSender interface {
	Send(ctx context.Context, batch []*Item, res []Result)
}

// Pipeliner sends records one by one without waiting (NATS, MQTT): Start
// sends it and returns what to wait on. Records of different devices are in
// flight together, up to the window; the group never gives two of one
// device at once.
type Pipeliner interface {
	Start(it *Item) Pending
}

// Pending is a record sent and not yet answered.
type Pending interface {
	// Wait returns the record's outcome, a Retry once deadline passes or
	// ctx ends.
	Wait(ctx context.Context, deadline time.Time) Result
}

// Acker takes the uplink's answers about deliveries (groups.Registry).
type Acker interface {
	Ack(groups.Ack) error
}

// Clock is the time source; tests inject their own.
type Clock func() time.Time

// Uplink is one uplink: a groups.Member feeding a Transport.
type Uplink struct {
	cfg    Config
	tr     Transport
	acker  Acker
	logger *slog.Logger
	now    Clock
	rnd    func() float64

	queue   chan *Item // bounded by the window: the uplink's credit
	held    atomic.Int64
	limMsgs *rate.Limiter
	limB    *rate.Limiter
	backoff backoff.Policy

	mu      sync.Mutex
	failed  map[[2]uint64]int64 // (partition, offset) -> ingest time of records naked, not yet sent; bound 4×window
	inSend  []*Item
	lastErr string
	state   string

	stats   counters
	latency *hist.Histogram

	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
	closed  atomic.Bool
}

type counters struct {
	delivered, sent, acked, failed, retried, dead, refused atomic.Uint64
	bytes                                                  atomic.Uint64
	retryAfter                                             atomic.Uint64
}

// New returns an uplink over tr that answers through acker. Call Run.
func New(cfg Config, tr Transport, acker Acker, logger *slog.Logger, now Clock) *Uplink {
	if now == nil {
		now = time.Now
	}
	u := &Uplink{cfg: cfg, tr: tr, acker: acker, now: now, rnd: rand.Float64,
		logger: logger.With("uplink", cfg.Name, "type", cfg.Type),
		// Twice the window: a record redelivered after an ack_wait expiry
		// (not expected, see the node's ack_wait) while the first copy is
		// still held must not make Deliver refuse, which would remove the
		// uplink from its group.
		queue: make(chan *Item, 2*cfg.Window), backoff: backoff.Policy{Min: cfg.RetryMin, Max: cfg.RetryMax},
		failed: map[[2]uint64]int64{}, latency: hist.New(groups.LatencyBounds), state: "starting", stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.RateMsgs > 0 {
		u.limMsgs = rate.NewLimiter(rate.Limit(cfg.RateMsgs), max(1, int(cfg.RateMsgs/10)))
	}
	if cfg.RateBytes > 0 {
		u.limB = rate.NewLimiter(rate.Limit(cfg.RateBytes), max(64<<10, int(cfg.RateBytes/10)))
	}
	return u
}

// Name is the uplink's name.
func (u *Uplink) Name() string { return u.cfg.Name }

// Deliver queues a copy of d. It never blocks: the group gives the uplink at
// most Window records at once (its credit), so the queue has room; a full
// queue (a bug, counted as refused) or a closed uplink refuses.
//
// The uplink holds a record far longer than the call (until the upstream
// answers), and a delivery's strings and payload may alias a buffer its
// caller reuses as soon as Deliver returns (a record forwarded by a peer is
// decoded in place from the connection's frame buffer): everything kept is
// copied here, device, source and headers included.
func (u *Uplink) Deliver(d *groups.Delivery) bool {
	if u.closed.Load() {
		return false
	}
	it := copyItem(d)
	select {
	case u.queue <- it:
		u.held.Add(1)
		u.stats.delivered.Add(1)
		return true
	default:
		u.stats.refused.Add(1)
		return false
	}
}

// copyItem copies what the uplink keeps of d into one allocation (payload,
// then device, source, header keys and values), so that nothing of the Item
// aliases the caller's buffers.
func copyItem(d *groups.Delivery) *Item {
	r := d.Record
	n := len(r.Payload) + len(r.Device) + len(r.Source) + len(d.Node)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	buf := make([]byte, 0, n)
	str := func(s string) string {
		if s == "" {
			return ""
		}
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[start], len(s)) // buf is never written past this point
	}
	buf = append(buf, r.Payload...)
	it := &Item{Payload: buf[:len(r.Payload):len(r.Payload)], Seq: r.Seq, Time: r.Time,
		Partition: d.Partition, Offset: d.Offset, Deliveries: d.Deliveries, Maybe: d.MaybeDelivered, handle: d.Ack}
	it.Device, it.Source, it.Node = str(r.Device), str(r.Source), str(d.Node)
	if len(r.Headers) > 0 {
		it.Headers = make([]wal.Header, len(r.Headers))
		for i, h := range r.Headers {
			it.Headers[i] = wal.Header{Key: str(h.Key), Value: str(h.Value)}
		}
	}
	return it
}

// Run sends until ctx ends or Close.
func (u *Uplink) Run(ctx context.Context) {
	defer close(u.done)
	u.started.Store(true)
	if u.closed.Load() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-u.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	batchMax := u.cfg.Window
	if u.cfg.Type == TypeHTTP {
		batchMax = u.cfg.HTTP.Batch
	}
	if p, ok := u.tr.(Pipeliner); ok {
		u.runPipelined(ctx, p)
		return
	}
	bs := u.tr.(BatchSender)
	_, inPlace := u.tr.(interface{ atomicBatches() bool })
	maxBytes := u.cfg.HTTP.BatchBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	batch := make([]*Item, 0, batchMax)
	res := make([]Result, batchMax)
	var carry *Item // taken from the queue, for the next batch (bytes bound)
	for {
		batch = batch[:0]
		if carry != nil {
			batch, carry = append(batch, carry), nil
		} else {
			select {
			case <-ctx.Done():
				return
			case it := <-u.queue:
				batch = append(batch, it)
			}
		}
		size := len(batch[0].Payload)
	fill:
		for len(batch) < batchMax && size < maxBytes {
			select {
			case it := <-u.queue:
				if size+len(it.Payload) > maxBytes {
					carry = it
					break fill
				}
				batch = append(batch, it)
				size += len(it.Payload)
			default:
				break fill
			}
		}
		if !u.wait(ctx, batch) {
			return
		}
		if inPlace {
			u.sendAtomic(ctx, bs, batch, res)
			continue
		}
		el := u.send(ctx, bs, batch, res)
		for i, it := range batch {
			u.finish(it, res[i], el)
		}
	}
}

type flight struct {
	it    *Item
	p     Pending
	start time.Time
}

// runPipelined sends each record as it comes and answers the group about
// each as soon as its acknowledgement is in, so credit flows back
// continuously instead of batch by batch.
func (u *Uplink) runPipelined(ctx context.Context, p Pipeliner) {
	inflight := make(chan flight, u.cfg.Window)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for f := range inflight {
			r := f.p.Wait(ctx, f.start.Add(u.cfg.Timeout))
			u.finish(f.it, r, u.now().Sub(f.start))
		}
	}()
	defer func() {
		close(inflight)
		<-collected
	}()
	one := make([]*Item, 1)
	for {
		var it *Item
		select {
		case <-ctx.Done():
			return
		case it = <-u.queue:
		}
		one[0] = it
		if !u.wait(ctx, one) {
			u.nakAll(one, 0)
			return
		}
		u.stats.sent.Add(1)
		now := u.now()
		inflight <- flight{it: it, p: p.Start(it), start: now}
	}
}

// send hands batch to the transport once and returns how long it took.
func (u *Uplink) send(ctx context.Context, bs BatchSender, batch []*Item, res []Result) time.Duration {
	u.mu.Lock()
	u.inSend = batch
	u.mu.Unlock()
	clear(res)
	start := u.now()
	u.stats.sent.Add(uint64(len(batch)))
	bs.Send(ctx, batch, res[:len(batch)])
	el := u.now().Sub(start)
	u.mu.Lock()
	u.inSend = nil
	u.mu.Unlock()
	return el
}

// sendAtomic sends a batch whose records share one outcome (an HTTP POST).
// A retryable failure retries the same batch after a jittered backoff,
// keeping its records (their ack_wait restarted), so that a retry carries
// the same idempotency key. A refusal of a batch of several records sends
// them again one by one, so that only the refused ones are dead-lettered.
func (u *Uplink) sendAtomic(ctx context.Context, bs BatchSender, batch []*Item, res []Result) {
	for attempt := 0; ; attempt++ {
		el := u.send(ctx, bs, batch, res)
		r := res[0]
		switch {
		case r.Outcome == OK:
			for _, it := range batch {
				u.finish(it, r, el)
			}
			return
		case r.Outcome == Permanent && len(batch) > 1:
			u.noteErr(r.Err)
			for _, it := range batch {
				u.sendAtomic(ctx, bs, []*Item{it}, res)
			}
			return
		case r.Outcome == Permanent:
			u.finish(batch[0], r, el)
			return
		}
		u.stats.failed.Add(uint64(len(batch)))
		u.stats.retried.Add(uint64(len(batch)))
		u.noteErr(r.Err)
		u.mu.Lock()
		u.state = "retrying"
		u.mu.Unlock()
		if ctx.Err() != nil {
			u.nakAll(batch, 0)
			return
		}
		d := u.retryWait(u.backoff.Delay(attempt, u.rnd()), r.RetryAfter)
		// Keep the records: tell the group the uplink still works on them.
		for _, it := range batch {
			_ = u.acker.Ack(groups.Ack{Handle: it.handle, Kind: groups.AckInProgress})
		}
		u.mu.Lock()
		u.inSend = batch
		u.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			u.nakAll(batch, 0)
			return
		case <-t.C:
		}
	}
}

// nakAll hands batch back to the group (shutdown).
func (u *Uplink) nakAll(batch []*Item, delay time.Duration) {
	for _, it := range batch {
		_ = u.acker.Ack(groups.Ack{Handle: it.handle, Kind: groups.AckNak, Delay: delay})
		u.held.Add(-1)
	}
}

func (u *Uplink) noteErr(err error) {
	if err == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err.Error() != u.lastErr {
		u.lastErr = err.Error()
		u.logger.Warn("upstream failed", "err", err)
	}
}

// wait applies the drain rate limit to batch.
func (u *Uplink) wait(ctx context.Context, batch []*Item) bool {
	if u.limMsgs != nil {
		for n := len(batch); n > 0; {
			k := min(n, u.limMsgs.Burst())
			if u.limMsgs.WaitN(ctx, k) != nil {
				return false
			}
			n -= k
		}
	}
	if u.limB != nil {
		for _, it := range batch {
			if u.limB.WaitN(ctx, min(len(it.Payload)+1, u.limB.Burst())) != nil {
				return false
			}
		}
	}
	return true
}

// finish answers the group about one record.
func (u *Uplink) finish(it *Item, r Result, el time.Duration) {
	defer u.held.Add(-1)
	key := [2]uint64{uint64(it.Partition), it.Offset}
	a := groups.Ack{Handle: it.handle}
	switch r.Outcome {
	case OK:
		if !r.Skipped {
			u.stats.acked.Add(1)
			u.stats.bytes.Add(uint64(len(it.Payload)))
			u.latency.Observe(el)
		}
		a.Kind = groups.AckDone
		u.mu.Lock()
		delete(u.failed, key)
		u.state = "up"
		u.mu.Unlock()
	case Back:
		u.stats.retried.Add(1)
		a.Kind = groups.AckNak
		u.mu.Lock()
		if len(u.failed) < 4*u.cfg.Window {
			u.failed[key] = it.Time
		}
		u.mu.Unlock()
	case Retry:
		u.stats.failed.Add(1)
		u.stats.retried.Add(1)
		a.Kind, a.Delay = groups.AckNak, u.retryWait(u.RetryDelay(it.Deliveries), r.RetryAfter)
		u.mu.Lock()
		if len(u.failed) < 4*u.cfg.Window {
			u.failed[key] = it.Time
		}
		if r.Err != nil && r.Err.Error() != u.lastErr {
			u.lastErr = r.Err.Error()
			u.logger.Warn("upstream failed: retrying", "err", r.Err, "device", it.Device, "seq", it.Seq)
		}
		u.state = "retrying"
		u.mu.Unlock()
	default:
		u.stats.failed.Add(1)
		u.stats.dead.Add(1)
		a.Kind = groups.AckTerm
		u.mu.Lock()
		delete(u.failed, key)
		if r.Err != nil {
			u.lastErr = r.Err.Error()
		}
		u.mu.Unlock()
		u.logger.Warn("upstream refused a record: dead letter", "device", it.Device, "seq", it.Seq, "node", it.Node,
			"partition", it.Partition, "offset", it.Offset, "reason", errString(r.Err))
	}
	if err := u.acker.Ack(a); err != nil && !errors.Is(err, groups.ErrUnknownGroup) {
		u.logger.Debug("ack to group", "err", err)
	}
}

// retryWait is the wait before sending again after a failure: the backoff,
// or longer when the upstream asked for it (Retry-After), that request
// capped at retry_after_max (0: ignored). A request honoured is counted.
func (u *Uplink) retryWait(backoff, asked time.Duration) time.Duration {
	if asked <= 0 || u.cfg.RetryAfterMax <= 0 {
		return backoff
	}
	u.stats.retryAfter.Add(1)
	return max(backoff, min(asked, u.cfg.RetryAfterMax))
}

// RetryDelay is the delay before the delivery after the deliveries-th.
func (u *Uplink) RetryDelay(deliveries int) time.Duration {
	return u.backoff.Delay(max(0, deliveries-1), u.rnd())
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Close stops sending and closes the transport; records held go back to the
// group (they were never acked).
func (u *Uplink) Close() {
	if u.closed.Swap(true) {
		return
	}
	close(u.stop)
	if i, ok := u.tr.(interface{ interrupt() }); ok {
		i.interrupt() // a look-up upstream (nats) would hold Run up to the timeout
	}
	if u.started.Load() {
		<-u.done
	}
	u.tr.Close()
}

// Stats is a snapshot of an uplink: the API's document and, for /metrics,
// the upstream latency.
type Stats struct {
	apiv1.UplinkStatus
	Latency hist.Snapshot `json:"-"`
}

// Stats returns a snapshot.
func (u *Uplink) Stats() Stats {
	s := Stats{UplinkStatus: apiv1.UplinkStatus{Name: u.cfg.Name, Type: u.cfg.Type, Queue: u.cfg.QueueName(), Connected: u.tr.Connected(),
		Held: int(u.held.Load()), Window: u.cfg.Window,
		Delivered: u.stats.delivered.Load(), Sent: u.stats.sent.Load(), Acked: u.stats.acked.Load(),
		AckedBytes: u.stats.bytes.Load(), Failed: u.stats.failed.Load(), Retried: u.stats.retried.Load(),
		DeadLetters: u.stats.dead.Load(), Refused: u.stats.refused.Load(), RetryAfter: u.stats.retryAfter.Load()}, Latency: u.latency.Snapshot()}
	if c, ok := u.tr.(interface {
		checkStats() (uint64, uint64, uint64)
	}); ok {
		s.UpstreamChecks, s.AlreadyUpstream, s.Unverified = c.checkStats()
	}
	u.mu.Lock()
	s.State, s.LastError = u.state, u.lastErr
	oldest := int64(0)
	for _, t := range u.failed {
		if oldest == 0 || t < oldest {
			oldest = t
		}
	}
	for _, it := range u.inSend {
		if oldest == 0 || it.Time < oldest {
			oldest = it.Time
		}
	}
	u.mu.Unlock()
	if !s.Connected {
		s.State = "down"
	}
	if oldest > 0 {
		s.OldestUnsentSeconds = max(0, float64(u.now().UnixNano()-oldest)/1e9)
	}
	return s
}

// Open builds the uplink of cfg with its transport; node is this node's ID.
func Open(cfg Config, node string, acker Acker, logger *slog.Logger) (*Uplink, error) {
	lg := logger.With("uplink", cfg.Name, "type", cfg.Type)
	var tr Transport
	var err error
	switch cfg.Type {
	case TypeNATS:
		tr, err = newNATS(&cfg, node, lg)
	case TypeHTTP:
		tr, err = newHTTP(&cfg)
	case TypeMQTT:
		tr, err = newMQTT(&cfg, node, lg)
	default:
		err = fmt.Errorf("uplink %s: type %q is not built yet", cfg.Name, cfg.Type)
	}
	if err != nil {
		return nil, err
	}
	return New(cfg, tr, acker, logger, nil), nil
}

// Window is the uplink's credit in its group.
func (u *Uplink) Window() int { return u.cfg.Window }
