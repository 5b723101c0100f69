package gateway

import (
	"context"
	"fmt"

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
// record, its only member's credit is the window, an upstream outage never
// dead-letters (the uplink naks with its own backoff, for days if need be),
// and ack_wait leaves room for a publish that takes the whole timeout.
func uplinkQueueConfig(cfg config.Config, uc uplink.Config) queue.Config {
	qc := queueConfig(cfg, config.Group{Queue: uc.QueueName(), Deliver: "all"})
	qc.MaxInFlight = uc.Window
	qc.MaxDeliver = 1 << 30
	qc.AckWait = max(qc.AckWait, 3*uc.Timeout)
	qc.MaxNakDelay = max(qc.MaxNakDelay, uc.RetryMax)
	return qc
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
