package uplink

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// mqttTransport publishes with QoS 1 on a persistent session. MQTT 3.1.1
// carries no headers: the payload goes as it is, the record's identity only
// in the topic template's {device} and {node}.
type mqttTransport struct {
	cfg    *Config
	topic  *Template
	client paho.Client
	// gen counts connections made and lost: paho's reconnect may complete a
	// token without a real PUBACK (GOTCHAS 4.4), so a token that completed
	// across a change of gen proves nothing and the record is sent again.
	gen    atomic.Uint64
	up     atomic.Bool
	logger *slog.Logger
	subj   []byte
}

func newMQTT(cfg *Config, node string, logger *slog.Logger) (*mqttTransport, error) {
	t, err := CompileTemplate(cfg.MQTT.Topic, TopicSyntax)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: mqtt.topic: %w", cfg.Name, err)
	}
	tr := &mqttTransport{cfg: cfg, topic: t, logger: logger}
	m := cfg.MQTT
	id := m.ClientID
	if id == "" {
		id = "edgeq-" + node + "-uplink-" + cfg.Name
	}
	o := paho.NewClientOptions()
	o.AddBroker(m.Broker)
	o.SetClientID(id)
	o.SetUsername(m.Username)
	o.SetPassword(m.Password.Reveal())
	o.SetProtocolVersion(4)
	o.SetCleanSession(false) // persistent session: the broker keeps our in-flight QoS 1 state
	o.SetOrderMatters(true)
	o.SetConnectTimeout(cfg.Timeout)
	o.SetWriteTimeout(cfg.Timeout)
	o.SetAutoReconnect(true)
	o.SetConnectRetry(true) // an absent broker is an outage, not a config error
	o.SetConnectRetryInterval(cfg.RetryMin)
	o.SetMaxReconnectInterval(cfg.RetryMax)
	o.SetOnConnectHandler(func(paho.Client) {
		tr.gen.Add(1)
		tr.up.Store(true)
		logger.Info("uplink connected", "broker", m.Broker)
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		tr.gen.Add(1)
		tr.up.Store(false)
		logger.Warn("uplink connection lost", "err", err)
	})
	if cfg.wantsTLS() || strings.HasPrefix(m.Broker, "ssl:") || strings.HasPrefix(m.Broker, "mqtts:") {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		o.SetTLSConfig(tc)
	}
	tr.client = paho.NewClient(o)
	tr.client.Connect() // with ConnectRetry, it keeps trying in the background
	return tr, nil
}

func (t *mqttTransport) Connected() bool { return t.up.Load() }

func (t *mqttTransport) Close() { t.client.Disconnect(250) }

// Start publishes one record with QoS 1.
func (t *mqttTransport) Start(it *Item) Pending {
	if !t.up.Load() {
		return failed{Result{Outcome: Retry, Err: fmt.Errorf("mqtt: not connected")}}
	}
	gen := t.gen.Load()
	tok := t.client.Publish(string(t.topic.Render(t.subj[:0], it.Device, it.Node)), 1, false, it.Payload)
	return &mqttPending{t: t, tok: tok, gen: gen}
}

type mqttPending struct {
	t   *mqttTransport
	tok paho.Token
	gen uint64
}

// Wait trusts a completed token only if no reconnect happened between the
// publish and its completion.
func (p *mqttPending) Wait(ctx context.Context, deadline time.Time) Result {
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	select {
	case <-p.tok.Done():
	case <-tm.C:
		return Result{Outcome: Retry, Err: fmt.Errorf("mqtt: no PUBACK within %v", p.t.cfg.Timeout)}
	case <-ctx.Done():
		return Result{Outcome: Retry, Err: ctx.Err()}
	}
	switch {
	case p.tok.Error() != nil:
		return Result{Outcome: Retry, Err: fmt.Errorf("mqtt publish: %w", p.tok.Error())}
	case p.t.gen.Load() != p.gen:
		return Result{Outcome: Retry, Err: fmt.Errorf("mqtt: reconnected while the publish was in flight; sent again")}
	}
	return Result{Outcome: OK}
}
