package modbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/bridge"
	"edgeq/internal/backoff"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// Errors of the bridge's lifecycle.
var (
	ErrStarted     = errors.New("modbus bus already started")
	ErrStopTimeout = errors.New("modbus bus stop timed out")
)

// LatencyBuckets are the bounds of the request latency histogram.
var LatencyBuckets = []time.Duration{
	2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second,
}

// Bus polls the devices of one bus, one request at a time, and appends one
// record per device poll. Create it with New, run it with Start, end it with
// Stop.
type Bus struct {
	cfg    Config
	app    bridge.Appender
	logger *slog.Logger
	source string
	tr     transport
	devs   []*device
	rnd    *rand.Rand

	// free bounds the records being stored to cfg.MaxPending.
	free    chan *pending
	created int // run goroutine only

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	state   busState

	busCounters
	latency *hist.Histogram
}

// busState is guarded by Bus.mu.
type busState struct {
	open        bool
	resolved    string
	lastErr     string
	lastErrTime time.Time
}

type busCounters struct {
	opens, openFailures, stored, storageErrors, storageWaits atomic.Uint64
	outstanding                                              atomic.Int64
}

// New checks cfg (with defaults applied) and returns a stopped bus. An RTU
// bus claims its serial path in this process now, so two buses (or a serial
// port) on one path are refused here.
func New(cfg Config, app bridge.Appender, logger *slog.Logger) (*Bus, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if app == nil {
		return nil, fmt.Errorf("modbus[%s]: nil appender", cfg.Name)
	}
	if logger == nil {
		logger = slog.Default()
	}
	b := &Bus{
		cfg:     cfg,
		app:     app,
		logger:  logger.With("component", "modbus", "bus", cfg.Name),
		source:  cfg.source(),
		rnd:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		free:    make(chan *pending, cfg.MaxPending),
		done:    make(chan struct{}),
		latency: hist.New(LatencyBuckets),
	}
	now := time.Now()
	for i, d := range cfg.Devices {
		b.devs = append(b.devs, newDevice(d, i, now))
	}
	if cfg.RTU != nil {
		t, err := newRTU(cfg.Name, cfg.RTU, cfg.Timeout, logger)
		if err != nil {
			return nil, fmt.Errorf("modbus[%s]: %w", cfg.Name, err)
		}
		b.tr = t
	} else {
		b.tr = newTCP(cfg.TCP, cfg.Timeout)
	}
	return b, nil
}

// Name is the bus name.
func (b *Bus) Name() string { return b.cfg.Name }

// Start polls in the background until ctx ends or Stop; it does not block.
// A missing port or a refused connection is not an error: it is retried.
func (b *Bus) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return fmt.Errorf("modbus[%s]: %w", b.cfg.Name, ErrStarted)
	}
	ctx, b.cancel = context.WithCancel(ctx)
	b.started = true
	go b.run(ctx)
	return nil
}

// Stop ends polling (within one request's timeout), closes the port and
// waits for the records still being stored.
func (b *Bus) Stop(timeout time.Duration) error {
	b.mu.Lock()
	started, cancel := b.started, b.cancel
	b.mu.Unlock()
	if !started {
		b.tr.release()
		return nil
	}
	cancel()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-b.done:
	case <-deadline.C:
		return fmt.Errorf("modbus[%s]: %w: poller still running", b.cfg.Name, ErrStopTimeout)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for b.outstanding.Load() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("modbus[%s]: %w: %d records outstanding", b.cfg.Name, ErrStopTimeout, b.outstanding.Load())
		}
	}
	return nil
}

// run is the bus's one goroutine: it opens the port (again, with backoff,
// after an unplug), picks the device that needs the bus soonest and polls
// it. A request takes at most the timeout; a retry waits off the bus.
func (b *Bus) run(ctx context.Context) {
	defer close(b.done)
	defer b.tr.release()
	var reopenAt time.Time
	attempt := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		if !b.isOpen() && !now.Before(reopenAt) {
			if b.openTransport() {
				attempt = 0
			} else {
				reopenAt = now.Add(backoff.Policy{Min: b.cfg.ReopenMin, Max: b.cfg.ReopenMax}.Delay(attempt, b.rnd.Float64()))
				attempt++
			}
		}
		d := b.devs[0]
		for _, x := range b.devs[1:] {
			if x.sched.wake().Before(d.sched.wake()) {
				d = x
			}
		}
		wake := d.sched.wake()
		if !b.isOpen() && reopenAt.Before(wake) {
			wake = reopenAt
		}
		if wait := time.Until(wake); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		b.poll(ctx, d, now)
	}
}

func (b *Bus) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.open
}

// openTransport opens the port or connection; false when it failed.
func (b *Bus) openTransport() bool {
	resolved, err := b.tr.open()
	if err != nil {
		b.openFailures.Add(1)
		b.noteError(err)
		return false
	}
	if b.opens.Add(1) > 1 {
		b.logger.Info("modbus bus reopened", "at", resolved)
	} else {
		b.logger.Info("modbus bus open", "at", resolved)
	}
	b.mu.Lock()
	b.state.open, b.state.resolved = true, resolved
	b.mu.Unlock()
	return true
}

// closeTransport closes a port or connection that failed.
func (b *Bus) closeTransport(err error) {
	b.tr.close()
	b.mu.Lock()
	b.state.open = false
	b.mu.Unlock()
	b.noteError(err)
}

// noteError records err as the bus's last error; logged as a warning when
// it differs from the previous one.
func (b *Bus) noteError(err error) {
	msg := err.Error()
	b.mu.Lock()
	repeated := msg == b.state.lastErr
	b.state.lastErr, b.state.lastErrTime = msg, time.Now()
	b.mu.Unlock()
	if repeated {
		b.logger.Debug("modbus bus error (repeated)", "err", err)
		return
	}
	b.logger.Warn("modbus bus error", "err", err)
}

// poll runs the device's poll in progress, or starts one, until it is done
// or a request failed and will be retried after a backoff (the bus serves
// the other devices meanwhile).
func (b *Bus) poll(ctx context.Context, d *device, now time.Time) {
	p := d.cur
	if p == nil {
		p = d.begin(now)
	}
	for p.next < len(p.reads) && ctx.Err() == nil {
		rd := p.reads[p.next]
		if !b.isOpen() {
			err := unavailable(b.lastError())
			d.countError(errUnavailable, err)
			p.failRest(err)
			break
		}
		q := request{unit: byte(d.cfg.Unit), fn: rd.fn.code(), addr: uint16(rd.addr), qty: uint16(rd.qty)}
		start := time.Now()
		data, err := b.tr.do(q)
		lat := time.Since(start)
		d.requests.Add(1)
		if err == nil {
			b.latency.Observe(lat)
			d.noteLatency(lat)
			p.decode(d, rd, data)
			p.next++
			p.attempt = 0
			continue
		}
		k := kindOf(err)
		d.countError(k, err)
		b.logDevice(d, rd, err)
		if k == errLink {
			b.closeTransport(err)
		}
		var ex *ExceptionError
		final := errors.As(err, &ex) && !ex.retryable()
		if !final && p.attempt < b.cfg.Retries {
			p.attempt++
			d.retries.Add(1)
			d.sched.retryAt = time.Now().Add(backoff.Policy{Min: b.cfg.RetryBackoff, Max: b.cfg.MaxBackoff}.Delay(p.attempt-1, b.rnd.Float64()))
			d.cur = p
			return
		}
		if final {
			p.fail(d, rd, err)
			p.next++
			p.attempt = 0
			continue
		}
		// Out of retries: a slave that does not answer one request will not
		// answer the next ones of this poll either.
		p.failRest(err)
	}
	d.cur = nil
	b.finish(ctx, d, p)
}

// finish schedules the device's next poll and stores the record of this one.
func (b *Bus) finish(ctx context.Context, d *device, p *poll) {
	d.sched.done(p.groups, time.Now(), p.answered, b.cfg.MaxBackoff)
	d.polls.Add(1)
	if p.failed > 0 {
		d.failedPolls.Add(1)
	} else {
		d.noteGood(p.start)
		d.lastLogged = "" // the next failure is news again
	}
	if !d.shouldStore(p) {
		d.unchanged.Add(1)
		return
	}
	pr := b.take(ctx)
	if pr == nil {
		return // stopping
	}
	pr.rec.Device = d.cfg.Device
	pr.rec.Source = b.source
	pr.rec.Payload = d.appendRecord(pr.rec.Payload[:0], p)
	pr.rec.NoWait = true // a poll acknowledges nobody: it rides on the next commit round
	d.remember(p)
	b.outstanding.Add(1)
	b.app.AppendAsync(&pr.rec, pr.done)
}

// logDevice logs a failed request when the device's error changed: a
// device that stays dead logs once, not every poll.
func (b *Bus) logDevice(d *device, rd read, err error) {
	msg := err.Error()
	if msg == d.lastLogged {
		return
	}
	d.lastLogged = msg
	names := make([]string, len(rd.regs))
	for i, r := range rd.regs {
		names[i] = d.cfg.Registers[r].Name
	}
	b.logger.Warn("modbus request failed", "unit", d.cfg.Unit, "device", d.cfg.Device,
		"function", string(rd.fn), "address", rd.addr, "count", rd.qty, "registers", names, "err", err)
}

func (b *Bus) lastError() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.lastErr
}

// pending is one record being stored, reused.
type pending struct {
	rec  wal.Record
	bus  *Bus
	done func(wal.Position, error)
}

// retainPayload is the largest payload buffer kept for reuse.
const retainPayload = 4096

// take returns a free record, waiting while MaxPending are outstanding; nil
// when the bus stops first.
func (b *Bus) take(ctx context.Context) *pending {
	select {
	case pr := <-b.free:
		return pr
	default:
	}
	if b.created < b.cfg.MaxPending {
		b.created++
		pr := &pending{bus: b}
		pr.done = pr.complete
		return pr
	}
	b.storageWaits.Add(1)
	select {
	case pr := <-b.free:
		return pr
	case <-ctx.Done():
		return nil
	}
}

// complete runs on a log writer goroutine once the record is durable (or
// failed): count and recycle, never block.
func (pr *pending) complete(_ wal.Position, err error) {
	b := pr.bus
	if err != nil {
		b.storageErrors.Add(1)
		b.logger.Error("poll record lost: storing it failed", "device", pr.rec.Device, "err", err)
	} else {
		b.stored.Add(1)
	}
	payload := pr.rec.Payload[:0]
	if cap(payload) > retainPayload {
		payload = nil
	}
	pr.rec = wal.Record{Payload: payload}
	b.outstanding.Add(-1)
	b.free <- pr
}
