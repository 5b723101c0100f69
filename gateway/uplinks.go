package gateway

import (
	"context"
	"fmt"

	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
	"edgeq/gateway/nodestats"
)

// uplinkRun is one uplink and its declared queue group.
type uplinkRun struct {
	u   *uplink.Uplink
	key groups.GroupKey
}

// openUplinks declares each uplink's queue group and builds its transport.
func (n *Node) openUplinks() error {
	for _, c := range n.cfg.Uplinks {
		r, err := n.openUplink(n.cfg, c)
		if err != nil {
			n.closeUplinks()
			return err
		}
		n.uplinks = append(n.uplinks, r)
	}
	return nil
}

// uplinkQueueConfig is the group of an uplink: it starts at the oldest
// record, its only member's credit is the window, and an upstream outage
// never dead-letters (the uplink naks with its own backoff, for days if need
// be). The uplink always answers, so ack_wait only has to outlast the
// longest a record can wait in it: an in-place HTTP retry (backoff, or a
// Retry-After up to retry_after_max, plus a timeout, restarted by
// in-progress acks) or the queue behind a drain rate
// limit. An ack_wait expiry would redeliver a record the uplink still holds.
func uplinkQueueConfig(cfg config.Config, uc uplink.Config) groups.CoreConfig {
	qc := queueConfig(cfg, config.Group{Queue: uc.QueueName(), Deliver: "all"})
	qc.MaxInFlight = uc.Window
	qc.DeviceWindow = uc.EffectiveDeviceWindow()
	qc.MaxDeliver = 1 << 30
	qc.AckWait = max(qc.AckWait, uc.MaxHold(int64(cfg.NATS.MaxPayload)))
	qc.MaxNakDelay = max(qc.MaxNakDelay, uc.RetryMax, uc.RetryAfterMax)
	return qc
}

func (n *Node) startUplinks(ctx context.Context) error {
	for _, r := range n.uplinks {
		n.goBackground(func() { r.u.Run(ctx) })
		if _, err := n.queues.Join(r.key, groups.MemberID("uplink:"+r.u.Name()), r.u, r.u.Window()); err != nil {
			return fmt.Errorf("uplink %s: join group: %w", r.u.Name(), err)
		}
	}
	return nil
}

func (n *Node) closeUplinks() {
	n.bridgesMu.RLock()
	ups := n.uplinks
	n.bridgesMu.RUnlock()
	for _, r := range ups {
		r.u.Close()
	}
}

// uplinkStats are the uplinks' snapshots with their groups' lag from s (the
// log and groups of the same scrape).
func (n *Node) uplinkStats(s *nodestats.Snapshot) []uplink.Stats {
	if len(n.uplinks) == 0 {
		return nil
	}
	means := uplink.MeanRecordSizes(s.Log.Partitions)
	lagOf := func(g *groups.GroupStats, p int, committed uint64) uint64 {
		_, lag := s.GroupPartition(g, p, committed)
		return lag
	}
	out := make([]uplink.Stats, 0, len(n.uplinks))
	for _, r := range n.uplinks {
		us := r.u.Stats()
		us.LagRecords, us.LagBytes, us.Leading = means.GroupLag(s.Node, s.Groups, r.key, lagOf)
		out = append(out, us)
	}
	return out
}
