package gateway

import (
	"context"
	"fmt"
	"time"

	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
	"edgeq/gateway/nodestats"
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
func uplinkQueueConfig(cfg config.Config, uc uplink.Config) queue.Config {
	qc := queueConfig(cfg, config.Group{Queue: uc.QueueName(), Deliver: "all"})
	qc.MaxInFlight = uc.Window
	qc.DeviceWindow = uc.EffectiveDeviceWindow()
	qc.MaxDeliver = 1 << 30
	qc.AckWait = max(qc.AckWait, uplinkAckWait(uc, int64(cfg.NATS.MaxPayload)))
	qc.MaxNakDelay = max(qc.MaxNakDelay, uc.RetryMax, uc.RetryAfterMax)
	return qc
}

func uplinkAckWait(uc uplink.Config, maxPayload int64) time.Duration {
	wait := uc.RetryMax
	if uc.Type == uplink.TypeHTTP { // only HTTP answers carry a Retry-After
		wait = max(wait, uc.RetryAfterMax)
	}
	w := 2*(wait+uc.Timeout) + time.Minute
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
	means := partitionMeans(s)
	out := make([]uplink.Stats, 0, len(n.uplinks))
	for _, r := range n.uplinks {
		us := r.u.Stats()
		us.LagRecords, us.LagBytes, us.Leading = groupLag(s, means, r.key)
		out = append(out, us)
	}
	return out
}

// recordMeans are the mean stored record sizes of the local partitions
// (framing included), and of the whole local log.
type recordMeans struct {
	part map[int]float64
	node float64
}

func partitionMeans(s *nodestats.Snapshot) recordMeans {
	m := recordMeans{part: make(map[int]float64, len(s.Log.Partitions))}
	var bytes, records float64
	for _, p := range s.Log.Partitions {
		if p.First > 0 && p.Last >= p.First && p.Bytes > 0 {
			k := float64(p.Last - p.First + 1)
			m.part[p.Partition] = float64(p.Bytes) / k
			bytes, records = bytes+float64(p.Bytes), records+k
		}
	}
	if records > 0 {
		m.node = bytes / records
	}
	return m
}

// groupLag is the lag of the group of key in records and, estimated without
// reading a record, in bytes: each partition's lag times its mean stored
// record size. A peer's partition, whose sizes this node does not know, is
// counted at this node's mean. leading is false (and the lags 0) where this
// node does not deliver the group.
func groupLag(s *nodestats.Snapshot, means recordMeans, key groups.GroupKey) (records, bytes uint64, leading bool) {
	for i := range s.Groups {
		g := &s.Groups[i]
		if g.Key != key {
			continue
		}
		var b float64
		for _, p := range g.Core.Partitions {
			_, lag := s.GroupPartition(g, p.Partition, p.Committed)
			records += lag
			mean := means.node
			if ref, remote := g.Partitions[p.Partition]; !remote || ref.Node == s.Node {
				local := p.Partition
				if remote {
					local = ref.Partition
				}
				mean = means.part[local]
			}
			b += float64(lag) * mean
		}
		return records, uint64(b + 0.5), g.Leading
	}
	return 0, 0, false
}
