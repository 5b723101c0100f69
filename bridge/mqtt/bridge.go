package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/bridge"
	"edgeq/internal/backoff"
	"edgeq/internal/loglimit"
	"edgeq/wal"
)

// Errors of the bridge's life cycle.
var (
	ErrStarted     = errors.New("mqtt bridge: already started or stopped")
	ErrStopTimeout = errors.New("mqtt bridge: stop timed out")
)

// DefaultStopTimeout bounds the stop that follows the end of Start's context.
const DefaultStopTimeout = 5 * time.Second

// Bridge subscribes to an MQTT broker and appends every message, mapped to a
// device, to the log. See the package documentation for its promises.
type Bridge struct {
	cfg      Config
	clientID string
	broker   *url.URL
	source   string
	headers  []wal.Header // static headers, shared read-only by every record
	mapper   *Mapper
	app      bridge.Appender
	logger   *slog.Logger
	backoff  backoff.Policy
	rnd      func() float64
	now      func() time.Time
	limiter  *loglimit.Keyed[Reason] // bound: maxLimiterKeys

	conns  connTracker
	client paho.Client

	queue   chan inbound  // paho's router → worker
	drained chan struct{} // capacity 1: the queue fell below the low-water mark
	slots   chan struct{} // one per message between the worker and its ack
	acks    chan ackItem  // appender callbacks → acker; as large as slots, so never full
	pending sync.WaitGroup
	nextIdx uint64 // arrival index of the next message; worker only

	accepting   atomic.Bool
	connected   atomic.Bool
	subscribed  atomic.Bool
	failedEpoch atomic.Uint64 // a storage error happened on this connection
	bounceEpoch atomic.Uint64 // the connection the supervisor is asked to break
	bounceSig   chan struct{}
	bounces     atomic.Int64 // consecutive forced reconnects, for their backoff

	lifeMu     sync.Mutex // orders Start against Stop
	started    bool
	stopOnce   sync.Once
	stop       chan struct{}
	workerDone chan struct{}
	ackerDone  chan struct{}
	superDone  chan struct{}

	stats   counters
	lastErr lastError

	// afterAck, when set (tests), is called after each QoS 1/2 ack.
	afterAck func(paho.Message)
}

// New builds a bridge; it does not connect. nodeID derives the client ID when
// cfg.ClientID is empty. logger may be nil.
func New(cfg Config, nodeID string, app bridge.Appender, logger *slog.Logger) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if app == nil {
		return nil, fmt.Errorf("mqtt[%s]: no appender", cfg.Name)
	}
	if cfg.ClientID == "" && nodeID == "" {
		return nil, fmt.Errorf("mqtt[%s].client_id: empty, and no node ID to derive it from", cfg.Name)
	}
	if logger == nil {
		logger = slog.Default()
	}
	broker, err := parseBroker(cfg.Broker)
	if err != nil {
		return nil, fmt.Errorf("mqtt[%s].broker: %w", cfg.Name, err)
	}
	mapper, err := NewMapper(cfg.Device)
	if err != nil {
		return nil, fmt.Errorf("mqtt[%s].%w", cfg.Name, err)
	}
	tlsCfg, err := loadTLS(&cfg)
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		cfg:        cfg,
		clientID:   cfg.EffectiveClientID(nodeID),
		broker:     broker,
		source:     cfg.Source(),
		headers:    staticHeaders(cfg.Headers),
		mapper:     mapper,
		app:        app,
		logger:     logger.With("component", "mqtt", "bridge", cfg.Name),
		backoff:    backoff.Policy{Min: cfg.ReconnectMin, Max: cfg.ReconnectMax},
		rnd:        rand.Float64,
		now:        time.Now,
		conns:      connTracker{tls: tlsCfg, timeout: cfg.ConnectTimeout},
		queue:      make(chan inbound, cfg.QueueSize),
		drained:    make(chan struct{}, 1),
		slots:      make(chan struct{}, cfg.QueueSize),
		acks:       make(chan ackItem, cfg.QueueSize),
		bounceSig:  make(chan struct{}, 1),
		stop:       make(chan struct{}),
		workerDone: make(chan struct{}),
		ackerDone:  make(chan struct{}),
		superDone:  make(chan struct{}),
	}
	b.limiter = loglimit.NewKeyed[Reason](cfg.LogInterval, maxLimiterKeys)
	b.conns.throttle = b.throttleReads
	b.client = paho.NewClient(b.clientOptions())
	return b, nil
}

func staticHeaders(m map[string]string) []wal.Header {
	hs := make([]wal.Header, 0, len(m))
	for k, v := range m {
		hs = append(hs, wal.Header{Key: k, Value: v})
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Key < hs[j].Key })
	return hs
}

// Start connects in the background and returns at once: a broker that is down
// is retried with backoff, never fatal. When ctx ends the bridge stops as
// Stop(DefaultStopTimeout) does. A bridge starts once.
func (b *Bridge) Start(ctx context.Context) error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	select {
	case <-b.stop:
		return ErrStarted
	default:
	}
	if b.started {
		return ErrStarted
	}
	b.started = true
	b.accepting.Store(true)
	go b.work()
	go b.ackLoop()
	go b.supervise()
	b.client.Connect() // with ConnectRetry its token completes only once connected
	go func() {
		select {
		case <-ctx.Done():
			if err := b.Stop(DefaultStopTimeout); err != nil {
				b.logger.Warn("stop after context end", "err", err)
			}
		case <-b.stop:
		}
	}()
	b.logger.Info("started", "broker", b.broker.Redacted(), "client_id", b.clientID,
		"topics", b.cfg.SubscribeTopics(), "qos", b.cfg.QoS)
	return nil
}

// Stop stops taking messages, waits up to timeout for the queued and
// in-flight appends and their acks, then disconnects. Messages it did not ack
// stay in the broker's session and are redelivered to the next client with
// this client ID. It returns ErrStopTimeout (wrapped) when the wait ran out.
// Stop may be called more than once; only the first call does anything.
func (b *Bridge) Stop(timeout time.Duration) error {
	var err error
	b.stopOnce.Do(func() { err = b.shutdown(timeout) })
	return err
}

func (b *Bridge) shutdown(timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	b.lifeMu.Lock()
	b.accepting.Store(false)
	close(b.stop)
	started := b.started
	b.lifeMu.Unlock()
	if !started {
		return nil
	}
	// Once the worker is done nothing adds to pending, so waiting on it is safe.
	go func() {
		<-b.workerDone
		b.pending.Wait()
		close(b.acks)
	}()
	var err error
	select {
	case <-b.ackerDone:
	case <-deadline.C:
		err = fmt.Errorf("%w: %d queued, %d appends pending; the broker redelivers them",
			ErrStopTimeout, len(b.queue), len(b.slots))
		b.logger.Warn("stop timed out", "err", err)
	}
	<-b.superDone
	// Acks are handed to paho before the DISCONNECT, which goes out after them.
	b.client.Disconnect(250)
	b.connected.Store(false)
	b.subscribed.Store(false)
	b.logger.Info("stopped", "stored", b.stats.stored.Load(), "acked", b.stats.acked.Load())
	return err
}

// Status returns the bridge's state and counters.
func (b *Bridge) Status() Status {
	c := b.stats.snapshot()
	c.Queued = len(b.queue)
	c.Pending = len(b.slots)
	msg, when := b.lastErr.get()
	return Status{
		Name:          b.cfg.Name,
		Broker:        b.broker.Redacted(),
		ClientID:      b.clientID,
		Connected:     b.connected.Load(),
		Subscribed:    b.subscribed.Load(),
		LastError:     msg,
		LastErrorTime: when,
		Counters:      c,
	}
}

// ClientID is the MQTT client ID the bridge connects with.
func (b *Bridge) ClientID() string { return b.clientID }

func (b *Bridge) setError(err error) { b.lastErr.set(err, b.now()) }
