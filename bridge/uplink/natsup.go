package uplink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
}

func newNATS(cfg *Config, node string, logger *slog.Logger) (*natsTransport, error) {
	t, err := CompileTemplate(cfg.NATS.Subject, SubjectSyntax)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: nats.subject: %w", cfg.Name, err)
	}
	opts := []nats.Option{
		nats.Name("edgeq-uplink-" + node + "-" + cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(cfg.RetryMin),
		nats.ReconnectJitter(cfg.RetryMin, cfg.RetryMin),
		nats.RetryOnFailedConnect(true), // an absent upstream is an outage, not a config error
		nats.Timeout(cfg.Timeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("uplink disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { logger.Info("uplink reconnected", "url", c.ConnectedUrlRedacted()) }),
	}
	n := cfg.NATS
	switch {
	case n.Token != "":
		opts = append(opts, nats.Token(n.Token))
	case n.User != "":
		opts = append(opts, nats.UserInfo(n.User, n.Password))
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
	return &natsTransport{cfg: cfg, node: node, subject: t, nc: nc, js: js, logger: logger}, nil
}

func (t *natsTransport) Connected() bool { return t.nc.IsConnected() }

func (t *natsTransport) Close() { t.nc.Close() }

// Start publishes one record; Nats-Msg-Id makes a retry of a record the
// stream already has a duplicate it drops (within the stream's duplicate
// window).
func (t *natsTransport) Start(it *Item) Pending {
	m := nats.NewMsg(string(t.subject.Render(t.subj[:0], it.Device, it.Node)))
	for _, h := range it.Headers {
		m.Header.Add(h.Key, h.Value)
	}
	m.Header.Set("Edgeq-Node", it.Node)
	m.Header.Set("Edgeq-Device", it.Device)
	m.Header.Set("Edgeq-Seq", strconv.FormatUint(it.Seq, 10))
	m.Header.Set("Edgeq-Time", strconv.FormatInt(it.Time, 10))
	if it.Source != "" {
		m.Header.Set("Edgeq-Source", it.Source)
	}
	m.Data = it.Payload
	f, err := t.js.PublishMsgAsync(m, jetstream.WithMsgID(it.MsgID()), jetstream.WithStallWait(t.cfg.Timeout))
	if err != nil {
		return failed{Result{Outcome: Retry, Err: fmt.Errorf("nats publish: %w", err)}}
	}
	return natsPending{f}
}

type natsPending struct{ f jetstream.PubAckFuture }

func (p natsPending) Wait(ctx context.Context, deadline time.Time) Result {
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
