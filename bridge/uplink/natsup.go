package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsErrMessageTooLarge is JetStream's "message size exceeds maximum allowed":
// sending it again cannot succeed.
const jsErrMessageTooLarge = 10054

type natsTransport struct {
	cfg     *Config
	node    string
	subject *Template
	nc      *nats.Conn
	js      jetstream.JetStream
	logger  *slog.Logger
	subj    []byte

	// order keeps a device's records in order upstream when the group gives
	// the uplink several of one device at once (device_window > 1).
	order *natsOrder
	// seen is what the stream holds of each device (natsseen.go).
	seen          *natsSeen
	logUnverified sync.Once
	// ctx bounds the look-ups; interrupt cancels it (the uplink closing).
	ctx    context.Context
	cancel context.CancelFunc
}

// errBehind hands a record back unsent: sending it could put it upstream
// ahead of an earlier record of its device.
var errBehind = errors.New("not sent: an earlier record of its device failed or is in flight on an earlier connection")

func newNATS(cfg *Config, node string, logger *slog.Logger) (*natsTransport, error) {
	t, err := CompileTemplate(cfg.NATS.Subject, SubjectSyntax)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: nats.subject: %w", cfg.Name, err)
	}
	seen := newNATSSeen()
	opts := []nats.Option{
		nats.Name("edgeq-uplink-" + node + "-" + cfg.Name),
		// A user that may not read the stream (no $JS.API permissions):
		// records are sent again unchecked rather than never (natsseen.go).
		// The server's answer is an asynchronous error; a request just
		// times out.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), "$JS.API") {
				seen.denied.Store(true)
			}
		}),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cfg.RetryMin),
		nats.ReconnectJitter(cfg.RetryMin, cfg.RetryMin),
		nats.RetryOnFailedConnect(true), // an absent upstream is an outage, not a config error
		nats.Timeout(cfg.Timeout),
		// No reconnect buffer: a record published while the connection is
		// down fails at once instead of going out on the next connection,
		// possibly ahead of an earlier one lost with the old connection.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("uplink disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			seen.denied.Store(false) // permissions may have changed: ask again
			logger.Info("uplink reconnected", "url", c.ConnectedUrlRedacted())
		}),
	}
	n := cfg.NATS
	switch {
	case n.Token != "":
		opts = append(opts, nats.Token(n.Token.Reveal()))
	case n.User != "":
		opts = append(opts, nats.UserInfo(n.User, n.Password.Reveal()))
	case n.CredsFile != "":
		opts = append(opts, nats.UserCredentials(n.CredsFile))
	}
	if cfg.wantsTLS() || strings.HasPrefix(n.URL, "tls://") {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(n.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: nats connect: %w", cfg.Name, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*cfg.Window), jetstream.WithPublishAsyncTimeout(cfg.Timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("uplink %s: jetstream: %w", cfg.Name, err)
	}
	tr := &natsTransport{cfg: cfg, node: node, subject: t, nc: nc, js: js, logger: logger, seen: seen}
	tr.ctx, tr.cancel = context.WithCancel(context.Background())
	if cfg.EffectiveDeviceWindow() > 1 {
		tr.order = &natsOrder{devs: map[devID]*natsDev{}}
	}
	return tr, nil
}
func (t *natsTransport) Connected() bool { return t.nc.IsConnected() }

func (t *natsTransport) Close() {
	t.cancel()
	t.nc.Close()
}

// interrupt ends a look-up under way: the uplink is closing.
func (t *natsTransport) interrupt() { t.cancel() }

// natsOrder tracks, per device (node and device: sequence numbers are per
// node), the records sent and not answered and the connection they went
// out on. One connection delivers in order, and JetStream stores a
// device's records in the order it receives them; what could reorder them
// is a record sent behind one that then fails: behind one still in flight
// on a connection that was lost, or behind one the stream refuses while it
// is not ready (it does not exist yet, it is being recovered after a
// restart) and then accepts the next. So:
//
//   - after a failure of a device's record, or when the connection changed
//     while some of its records are in flight, the device's further
//     records are handed back unsent until the group starts the device
//     again from its oldest unfinished record (the group's device window
//     does that once none of the device is in flight);
//   - on each connection a device has one record in flight until one of
//     its records is acknowledged on that connection (a probe): the records
//     behind the probe are handed back, and resent once the stream took it.
//
// Nats-Msg-Id deduplicates what is sent again. The remaining reorder case:
// the stream refuses record k with a retryable error (or drops it
// unanswered) and stores k+1, sent behind it on a connection where it had
// stored the device's records before; device_window: 1 rules it out.
//
// Bound: maxOrderDevices devices; beyond that idle ones are forgotten (they
// probe again).
type natsOrder struct {
	mu   sync.Mutex
	devs map[devID]*natsDev
}

// devID names a device: sequence numbers are per node.
type devID struct{ node, device string }

const maxOrderDevices = 1 << 14

type natsDev struct {
	flying int    // sent, not answered
	conn   uint64 // Stats().Reconnects when they were sent
	// okConn: the connection (+1; 0: none) on which a record of the device
	// was last acknowledged; until then one record at a time.
	okConn uint64
	// failed: a record of the device failed or was handed back; hand back
	// its further records until the group starts it again. maxSeq is the
	// highest of those: the records the group had out when it learnt of
	// the failure come in order, each above it, and its restart, from the
	// oldest unfinished record, comes once they are all answered and at or
	// below it (above only if retention took every one of them: then the
	// next round settles it).
	failed bool
	maxSeq uint64
}

func devKey(it *Item) devID { return devID{it.Node, it.Device} }

// send reports whether it may be sent now on connection conn and counts it in flight.
func (o *natsOrder) send(it *Item, conn uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := devKey(it)
	d := o.devs[k]
	if d == nil {
		if len(o.devs) >= maxOrderDevices {
			o.forgetIdle()
		}
		d = &natsDev{}
		o.devs[k] = d
	}
	if d.failed && d.flying == 0 && it.Seq <= d.maxSeq {
		d.failed, d.maxSeq = false, 0 // the group started the device again
	}
	if d.failed || (d.flying > 0 && (d.conn != conn || d.okConn != conn+1)) {
		d.failed, d.maxSeq = true, max(d.maxSeq, it.Seq)
		return false
	}
	d.flying++
	d.conn = conn
	return true
}

// forgetIdle drops the devices with nothing in flight and nothing to restart.
func (o *natsOrder) forgetIdle() {
	for k, d := range o.devs {
		if d.flying == 0 && !d.failed {
			delete(o.devs, k)
		}
	}
}

// unsent takes back a record send let through that did not go out.
func (o *natsOrder) unsent(it *Item) { o.done(it, false) }

// done notes the answer of a record sent; ok false: it failed and is sent again.
func (o *natsOrder) done(it *Item, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.devs[devKey(it)]
	if d == nil {
		return
	}
	d.flying--
	if ok {
		d.okConn = d.conn + 1
	} else {
		d.failed, d.maxSeq = true, max(d.maxSeq, it.Seq)
	}
}

// Start publishes one record; Nats-Msg-Id makes a retry of a record the
// stream already has a duplicate it drops (within the stream's duplicate
// window), and a record that may have gone out before is first looked up
// in the stream (natsseen.go): one it holds is not sent again. A record
// that could overtake an earlier one of its device is handed back unsent
// (natsOrder).
func (t *natsTransport) Start(it *Item) Pending {
	conn := t.nc.Stats().Reconnects
	if t.order != nil && !t.order.send(it, conn) {
		return failed{Result{Outcome: Back, Err: errBehind}}
	}
	subj := string(t.subject.Render(t.subj[:0], it.Device, it.Node))
	if it.Deliveries > 1 || it.Maybe {
		skip, err := t.check(it, subj, conn)
		if err != nil || skip {
			if t.order != nil {
				t.order.done(it, err == nil)
			}
			if err != nil {
				return failed{Result{Outcome: Retry, Err: err}}
			}
			return failed{Result{Outcome: OK, Skipped: true}}
		}
	}
	m := &nats.Msg{Subject: subj, Header: t.headers(it), Data: it.Payload}
	f, err := t.js.PublishMsgAsync(m, jetstream.WithStallWait(t.cfg.Timeout))
	if err != nil {
		if t.order != nil {
			t.order.unsent(it)
		}
		t.seen.answered(it, conn, false)
		return failed{Result{Outcome: Retry, Err: fmt.Errorf("nats publish: %w", err)}}
	}
	return natsPending{f: f, it: it, order: t.order, seen: t.seen, conn: conn}
}

// checkStats reports the stream look-ups of records that may have gone out
// before: reads, records found upstream (not sent again) and records sent
// again unchecked.
func (t *natsTransport) checkStats() (checks, skipped, unverified uint64) {
	return t.seen.checks.Load(), t.seen.skipped.Load(), t.seen.unverified.Load()
}

// headers builds the message's headers in one map sized for them, the
// single-value slices cut from one array.
func (t *natsTransport) headers(it *Item) nats.Header {
	n := 5 + len(it.Headers)
	if it.Source != "" {
		n++
	}
	h := make(nats.Header, n)
	vals := make([]string, 0, n)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for _, x := range it.Headers {
		if _, dup := h[x.Key]; dup {
			h[x.Key] = append(h[x.Key], x.Value)
			continue
		}
		set(x.Key, x.Value)
	}
	set("Edgeq-Node", it.Node)
	set("Edgeq-Device", it.Device)
	set("Edgeq-Seq", strconv.FormatUint(it.Seq, 10))
	set("Edgeq-Time", strconv.FormatInt(it.Time, 10))
	if it.Source != "" {
		set("Edgeq-Source", it.Source)
	}
	set(jetstream.MsgIDHeader, it.MsgID())
	return h
}

type natsPending struct {
	f     jetstream.PubAckFuture
	it    *Item
	order *natsOrder
	seen  *natsSeen
	conn  uint64
}

func (p natsPending) Wait(ctx context.Context, deadline time.Time) Result {
	r := p.wait(ctx, deadline)
	if p.order != nil {
		p.order.done(p.it, r.Outcome != Retry)
	}
	p.seen.answered(p.it, p.conn, r.Outcome == OK)
	return r
}

func (p natsPending) wait(ctx context.Context, deadline time.Time) Result {
	select {
	case <-p.f.Ok():
		return Result{Outcome: OK}
	case err := <-p.f.Err():
		return classifyJS(err)
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.f.Ok():
		return Result{Outcome: OK}
	case err := <-p.f.Err():
		return classifyJS(err)
	case <-t.C:
		return Result{Outcome: Retry, Err: jetstream.ErrAsyncPublishTimeout}
	case <-ctx.Done():
		return Result{Outcome: Retry, Err: ctx.Err()}
	}
}

// failed is a Pending that failed at once.
type failed struct{ r Result }

func (f failed) Wait(context.Context, time.Time) Result { return f.r }

func classifyJS(err error) Result {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == jsErrMessageTooLarge {
		return Result{Outcome: Permanent, Err: fmt.Errorf("jetstream: %w", err)}
	}
	return Result{Outcome: Retry, Err: fmt.Errorf("jetstream: %w", err)}
}
