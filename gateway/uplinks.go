package gateway

import (
	"context"
	"fmt"
	"time"

	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
	"edgeq/gateway/queue"
)

// uplinkRun is one uplink and its declared queue group.
type uplinkRun struct {
	u   *uplink.Uplink
	key groups.GroupKey
}

// openUplinks declares each uplink's queue group and builds its transport.
func (n *Node) openUplinks() error {
	for _, c := range n.cfg.Uplinks {
		uc := uplink.Config(c)
		if uc.Subject == "" {
			uc.Subject = n.cfg.NATS.TelemetryPrefix + ".>"
		}
		key := groups.GroupKey{Filter: uc.Subject, Queue: uc.QueueName()}
		if err := n.queues.Declare(groups.GroupConfig{Key: key, Core: uplinkQueueConfig(n.cfg, uc)}); err != nil {
			n.closeUplinks()
			return fmt.Errorf("uplink %s: declare group: %w", uc.Name, err)
		}
		u, err := uplink.Open(uc, n.id, n.queues, n.logger)
		if err != nil {
			n.closeUplinks()
			return err
		}
		n.uplinks = append(n.uplinks, &uplinkRun{u: u, key: key})
	}
	return nil
}

// uplinkQueueConfig is the group of an uplink: it starts at the oldest
// record, its only member's credit is the window, and an upstream outage
// never dead-letters (the uplink naks with its own backoff, for days if need
// be). The uplink always answers, so ack_wait only has to outlast the
// longest a record can wait in it: an in-place HTTP retry (backoff plus a
// timeout, restarted by in-progress acks) or the queue behind a drain rate
// limit. An ack_wait expiry would redeliver a record the uplink still holds.
func uplinkQueueConfig(cfg config.Config, uc uplink.Config) queue.Config {
	qc := queueConfig(cfg, config.Group{Queue: uc.QueueName(), Deliver: "all"})
	qc.MaxInFlight = uc.Window
	qc.DeviceWindow = uc.EffectiveDeviceWindow()
	qc.MaxDeliver = 1 << 30
	qc.AckWait = max(qc.AckWait, uplinkAckWait(uc, int64(cfg.NATS.MaxPayload)))
	qc.MaxNakDelay = max(qc.MaxNakDelay, uc.RetryMax)
	return qc
}

func uplinkAckWait(uc uplink.Config, maxPayload int64) time.Duration {
	w := 2*(uc.RetryMax+uc.Timeout) + time.Minute
	if uc.RateMsgs > 0 {
		w += time.Duration(2 * float64(uc.Window) / uc.RateMsgs * float64(time.Second))
	}
	if uc.RateBytes > 0 {
		w += time.Duration(2 * float64(uc.Window) * float64(maxPayload) / uc.RateBytes * float64(time.Second))
	}
	return w
}

func (n *Node) startUplinks(ctx context.Context) error {
	for _, r := range n.uplinks {
		n.goBackground(func() { r.u.Run(ctx) })
		if _, err := n.queues.Join(r.key, queue.MemberID("uplink:"+r.u.Name()), r.u, r.u.Window()); err != nil {
			return fmt.Errorf("uplink %s: join group: %w", r.u.Name(), err)
		}
	}
	return nil
}

func (n *Node) closeUplinks() {
	for _, r := range n.uplinks {
		r.u.Close()
	}
}
