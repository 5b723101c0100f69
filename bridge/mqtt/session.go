package mqtt

import (
	"errors"
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/internal/backoff"
)

// pahoRetryFloor is what paho's own retry waits are set to. paho's backoff is
// neither jittered nor cut short by Stop, so the real wait happens in
// onNotification (backoff.Policy, interrupted by Stop) and paho's is reduced to this.
const pahoRetryFloor = 10 * time.Millisecond

// clientOptions are the paho options for the bridge's session. Everything that
// handles messages is registered here, before Connect: with a persistent
// session the broker sends queued messages right after CONNACK, before any
// Subscribe call returns (GOTCHAS 4.1).
func (b *Bridge) clientOptions() *paho.ClientOptions {
	o := paho.NewClientOptions()
	o.AddBroker(b.broker.String())
	o.SetClientID(b.clientID)
	o.SetUsername(b.cfg.Username)
	o.SetPassword(b.cfg.Password.Reveal())
	o.SetProtocolVersion(4)    // MQTT 3.1.1; no silent fall back to 3.1
	o.SetCleanSession(false)   // the broker keeps our subscriptions and unacked messages
	o.SetOrderMatters(true)    // one router goroutine, in order; onMessage never blocks
	o.SetAutoAckDisabled(true) // ack only once the record is durable
	o.SetDefaultPublishHandler(b.onMessage)
	o.SetOnConnectHandler(b.onConnect)
	o.SetConnectionLostHandler(b.onConnectionLost)
	o.SetConnectionNotificationHandler(b.onNotification)
	o.SetCustomOpenConnectionFn(b.conns.open)
	o.SetKeepAlive(b.cfg.KeepAlive)
	// A read pause (throttle.go) delays PINGRESP; the timeout must outlast it.
	o.SetPingTimeout(max(min(b.cfg.KeepAlive, 10*time.Second), 3*maxReadPause))
	o.SetConnectTimeout(b.cfg.ConnectTimeout)
	o.SetAutoReconnect(true)
	o.SetMaxReconnectInterval(pahoRetryFloor)
	o.SetConnectRetry(true) // a broker that is down at start is retried, not fatal
	o.SetConnectRetryInterval(pahoRetryFloor)
	return o
}

// onNotification waits the jittered backoff before every connection attempt
// but the very first. It runs on paho's connect or reconnect goroutine, which
// does nothing else meanwhile.
func (b *Bridge) onNotification(_ paho.Client, n paho.ConnectionNotification) {
	switch n := n.(type) {
	case paho.ConnectionNotificationConnecting:
		if n.IsReconnect || n.Attempt > 0 {
			backoff.Sleep(b.stop, b.backoff.Delay(n.Attempt, b.rnd()))
		}
	case paho.ConnectionNotificationFailed:
		err := fmt.Errorf("connect to %s: %w", b.broker.Redacted(), n.Reason)
		b.setError(err)
		b.logger.Warn("connection attempt failed", "err", err)
	}
}

// onConnect subscribes on every connect and reconnect: paho does not
// resubscribe by itself (GOTCHAS 4.3), and a broker that lost its state
// (restarted without persistence) would otherwise send nothing.
func (b *Bridge) onConnect(c paho.Client) {
	epoch := b.conns.current()
	b.connected.Store(true)
	if b.stats.connects.Add(1) > 1 {
		b.stats.reconnects.Add(1)
	}
	filters := make(map[string]byte)
	for _, f := range b.cfg.SubscribeTopics() {
		filters[f] = byte(b.cfg.QoS)
	}
	err := subscribe(c, filters, b.cfg.ConnectTimeout)
	if err != nil {
		// Retry on a new connection after backoff; meanwhile whatever the
		// session still holds keeps flowing.
		b.stats.subscribeErr.Add(1)
		b.setError(err)
		b.logger.Error("subscribe failed; reconnecting after backoff", "err", err)
		b.requestBounce(epoch)
		return
	}
	if b.conns.current() == epoch {
		b.subscribed.Store(true)
	}
	b.logger.Info("connected and subscribed", "epoch", epoch, "topics", len(filters))
}

func subscribe(c paho.Client, filters map[string]byte, timeout time.Duration) error {
	tok := c.SubscribeMultiple(filters, nil) // nil: every message goes to the default handler
	if !tok.WaitTimeout(timeout) {
		return fmt.Errorf("subscribe: no SUBACK within %v", timeout)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	st, ok := tok.(*paho.SubscribeToken)
	if !ok {
		return nil
	}
	var errs []error
	for topic, granted := range st.Result() {
		if granted == 0x80 {
			errs = append(errs, fmt.Errorf("subscribe %q: refused by the broker", topic))
		}
	}
	return errors.Join(errs...)
}

func (b *Bridge) onConnectionLost(_ paho.Client, err error) {
	b.connected.Store(false)
	b.subscribed.Store(false)
	b.stats.lost.Add(1)
	err = fmt.Errorf("connection lost: %w", err)
	b.setError(err)
	b.logger.Warn("connection lost; reconnecting", "err", err)
}

// requestBounce asks the supervisor to close the connection of epoch after
// backoff, so that the broker redelivers what the bridge left unacked.
func (b *Bridge) requestBounce(epoch uint64) {
	for {
		cur := b.bounceEpoch.Load()
		if epoch <= cur || b.bounceEpoch.CompareAndSwap(cur, epoch) {
			break
		}
	}
	select {
	case b.bounceSig <- struct{}{}:
	default: // a request is pending; it reads bounceEpoch when it runs
	}
}

// supervise runs forced reconnects, one at a time, each after the jittered
// backoff of the consecutive ones (reset by a stored record).
func (b *Bridge) supervise() {
	defer close(b.superDone)
	for {
		select {
		case <-b.stop:
			return
		case <-b.bounceSig:
		}
		attempt := int(b.bounces.Add(1) - 1)
		if !backoff.Sleep(b.stop, b.backoff.Delay(attempt, b.rnd())) {
			return
		}
		if epoch := b.bounceEpoch.Load(); b.conns.breakEpoch(epoch) {
			b.stats.forced.Add(1)
			b.logger.Info("broke the connection to get redelivery", "epoch", epoch, "attempt", attempt)
		}
	}
}
