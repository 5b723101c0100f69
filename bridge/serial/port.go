package serial

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/bridge"
	"edgeq/internal/loglimit"
	"edgeq/wal"
)

// logEvery paces the port's repeated log lines (storage errors, dropped
// frames): one per interval, the rest counted.
const logEvery = 10 * time.Second

// readBufSize is the most one Read takes from the tty.
const readBufSize = 4096

// Port is one serial line feeding the log. Create it with New, run it with
// Start, end it with Stop. A Port is started at most once.
type Port struct {
	cfg     Config
	app     bridge.Appender
	logger  *slog.Logger
	source  string
	headers []wal.Header // shared read-only by every record

	// Owned by the run goroutine.
	dec     *decoder
	framer  *Framer
	readBuf []byte
	rnd     *rand.Rand
	ctx     context.Context // of the run goroutine, for waits inside onFrame
	onFrame func([]byte, DropReason)

	// free holds the records not in flight; with created it bounds the
	// appends outstanding to cfg.MaxPending.
	free    chan *pending
	created int // run goroutine only

	reserve fdReserve // guarded by openMu

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	state   portState

	counters
	errLog  *loglimit.Limiter // storage errors, logged from writer goroutines
	dropLog *loglimit.Limiter // dropped frames, logged from the run goroutine
}

// portState is what Status reports besides the counters. Guarded by Port.mu.
type portState struct {
	open        bool
	resolved    string
	lastErr     string
	lastErrTime time.Time
}

// counters are read by Status while the port runs.
type counters struct {
	bytesIn, framesIn, stored, storageErrors      atomic.Uint64
	opens, openFailures, fdRefusals, storageWaits atomic.Uint64
	outstanding                                   atomic.Int64
	dropped                                       dropCounters
}

// New checks cfg and returns a stopped port. It opens nothing.
func New(cfg Config, app bridge.Appender, logger *slog.Logger) (*Port, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if app == nil {
		return nil, fmt.Errorf("serial[%s]: nil appender", cfg.Name)
	}
	if logger == nil {
		logger = slog.Default()
	}
	dec, err := newDecoder(cfg)
	if err != nil {
		return nil, fmt.Errorf("serial[%s]: %w", cfg.Name, err)
	}
	p := &Port{
		cfg:     cfg,
		app:     app,
		logger:  logger.With("component", "serial", "port", cfg.Name),
		source:  cfg.source(),
		headers: cfg.headers(),
		dec:     dec,
		framer:  NewFramer(cfg.MaxFrame),
		readBuf: make([]byte, readBufSize),
		rnd:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		free:    make(chan *pending, cfg.MaxPending),
		done:    make(chan struct{}),
	}
	p.onFrame = p.handleFrame
	p.errLog = loglimit.New(logEvery)
	p.dropLog = loglimit.New(logEvery)
	return p, nil
}

// Name is the configured port name.
func (p *Port) Name() string { return p.cfg.Name }

// Start opens the port in the background and keeps it open until ctx ends or
// Stop is called; it does not block. A missing device is not an error: it is
// retried. Start fails when another port of this process is configured with
// the same path or has its device open. Start ports early, while the process
// has few files open: Start reserves the low fds the port opens into.
func (p *Port) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return fmt.Errorf("serial[%s]: %w", p.cfg.Name, ErrStarted)
	}
	path := filepath.Clean(p.cfg.Path)
	if err := claims.claimConfigured(path, p.cfg.Name); err != nil {
		return fmt.Errorf("serial[%s]: %w", p.cfg.Name, err)
	}
	if dev, err := filepath.EvalSymlinks(path); err == nil {
		if owner, busy := claims.openBy(dev); busy {
			claims.releaseConfigured(path, p.cfg.Name)
			return fmt.Errorf("serial[%s]: %w: device %s is open by serial[%s]", p.cfg.Name, ErrPortInUse, dev, owner)
		}
	}
	openMu.Lock()
	if n, err := p.reserve.fill(reservedFDs); err != nil {
		p.logger.Warn("low fds not reserved: the port is refused when it opens at fd >= 1024", "held", n, "err", err)
	}
	openMu.Unlock()
	ctx, p.cancel = context.WithCancel(ctx)
	p.started = true
	go p.run(ctx, path)
	return nil
}

// Stop ends the port: the reader notices within ReadTimeout and closes the
// device, then Stop waits for the appends still outstanding. It returns
// ErrStopTimeout when they are not done within timeout. Stop the ports
// before closing the log they append to.
func (p *Port) Stop(timeout time.Duration) error {
	p.mu.Lock()
	started, cancel := p.started, p.cancel
	p.mu.Unlock()
	if !started {
		return nil
	}
	cancel()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-p.done:
	case <-deadline.C:
		return fmt.Errorf("serial[%s]: %w: reader still running", p.cfg.Name, ErrStopTimeout)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for p.outstanding.Load() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("serial[%s]: %w: %d appends outstanding", p.cfg.Name, ErrStopTimeout, p.outstanding.Load())
		}
	}
	return nil
}

// noteError records err as the port's last error. It is logged as a warning
// when it differs from the previous one, so a port that stays unplugged
// does not flood the log.
func (p *Port) noteError(err error) {
	msg := err.Error()
	p.mu.Lock()
	repeated := msg == p.state.lastErr
	p.state.lastErr, p.state.lastErrTime = msg, time.Now()
	p.mu.Unlock()
	if repeated {
		p.logger.Debug("serial port error (repeated)", "err", err)
		return
	}
	level := slog.LevelWarn
	if errors.Is(err, ErrFDLimit) {
		level = slog.LevelError
	}
	p.logger.Log(context.Background(), level, "serial port error", "err", err)
}

func (p *Port) setOpen(open bool, resolved string) {
	p.mu.Lock()
	p.state.open, p.state.resolved = open, resolved
	p.mu.Unlock()
}
