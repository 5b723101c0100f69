package gateway

import (
	"bytes"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"edgeq/gateway/config"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/hot"
	"edgeq/gateway/metrics"
	"edgeq/gateway/natsserver"
)

// statusTopDevices is how many busy devices /v1/status lists.
const statusTopDevices = 10

// collectorLogEvery bounds how often one collector's unchanged failure is
// logged: a missing sensor fails on every scrape.
const collectorLogEvery = 10 * time.Minute

// nodeMetrics is the node's part of /metrics and of the device health in
// /v1/status: the exposition, the device collectors and the log of their
// failures.
type nodeMetrics struct {
	expo       *metrics.Exposition
	collectors []devicemetrics.Collector
	top        int
	logger     *slog.Logger

	failMu  sync.Mutex
	failing map[string]collectorFailure // bound: one per collector

	bufs sync.Pool // *bytes.Buffer
}

type collectorFailure struct {
	msg    string
	logged time.Time
}

func newNodeMetrics(cfg config.Config, logger *slog.Logger) (*nodeMetrics, error) {
	cs, err := devicemetrics.NewCollectors(devicemetrics.Config{
		ProcRoot: cfg.Metrics.ProcRoot,
		SysRoot:  cfg.Metrics.SysRoot,
		DataDir:  cfg.DataDir,
	})
	if err != nil {
		return nil, err
	}
	return &nodeMetrics{
		expo: metrics.NewExposition(), collectors: cs, top: cfg.Metrics.TopDevices,
		logger: logger.With("component", "metrics"), failing: map[string]collectorFailure{},
	}, nil
}

// deviceSamples runs the device collectors. A collector that fails shows as
// edgeq_collector_success 0 and is logged when it starts failing, when its
// error changes, and at most every collectorLogEvery otherwise; it never
// fails the scrape.
func (m *nodeMetrics) deviceSamples(now time.Time) []devicemetrics.Sample {
	failed := map[string]bool{}
	samples := devicemetrics.CollectAllWithErrors(m.collectors, nil, func(c string, err error) {
		failed[c] = true
		msg := err.Error()
		m.failMu.Lock()
		prev, was := m.failing[c]
		logIt := !was || prev.msg != msg || now.Sub(prev.logged) >= collectorLogEvery
		if logIt {
			prev = collectorFailure{msg: msg, logged: now}
		}
		prev.msg = msg
		m.failing[c] = prev
		m.failMu.Unlock()
		if logIt {
			m.logger.Warn("device metrics collector failed", "collector", c, "err", msg)
		}
	})
	m.failMu.Lock()
	for c := range m.failing {
		if !failed[c] {
			delete(m.failing, c)
			m.logger.Info("device metrics collector recovered", "collector", c)
		}
	}
	m.failMu.Unlock()
	return samples
}

// snapshot copies what /metrics and /v1/status show. It reads atomics and
// takes only short locks, each for a copy: the log's device table for its
// size, the source table, each group's last stats snapshot (refreshed by the
// group's own goroutine; a scrape never waits for a group), and the
// hot-device detector for one bounded top-N walk (no sort, no allocation
// per device), and in a cluster the peer table and the elector (once for
// all groups; the elector holds its lock while it persists epochs, so a
// scrape during an election may wait for that fsync). The device collectors
// read files outside every lock.
func (n *Node) snapshot(top int, device bool) metrics.Snapshot {
	now := time.Now()
	s := metrics.Snapshot{
		Node: n.id, Version: n.version, Ready: n.ready.Load(), StartTime: n.started, Time: now,
		Log: n.log.Stats(),
	}
	srcs := n.ingest.Sources()
	s.Sources = make([]metrics.Source, 0, len(srcs))
	for name, c := range srcs {
		s.Sources = append(s.Sources, metrics.Source{Name: name, Msgs: c[0], Bytes: c[1], Errors: c[2]})
	}
	sort.Slice(s.Sources, func(i, j int) bool { return s.Sources[i].Name < s.Sources[j].Name })
	s.TopDevices, s.Hot = n.ingest.hotView(top)
	s.Groups = n.queues.Stats()
	s.Dispatch = n.queues.Counters()
	if n.cluster != nil {
		s.Cluster = n.cluster.Snapshot(s.Groups)
	}
	s.Tail = n.tail.Stats()
	cs := n.nats.Counters()
	if n.js != nil {
		s.JetStream = metrics.JetStreamStats{Enabled: true, APICalls: n.js.Total.Load(), APIErrors: n.js.Errors.Load(),
			Consumers: n.js.Consumers(), BadPulls: cs.BadPulls.Load(),
			ConsumersDeleted: n.js.Deleted.Load(), ConsumersExpired: n.js.Expired.Load()}
		os := n.js.OrderedStats()
		s.JetStream.Ordered, s.JetStream.MaxOrdered = os.Active, os.Max
		s.JetStream.OrderedCreated, s.JetStream.OrderedExpired, s.JetStream.OrderedRefused = os.Created, os.Expired, os.Refused
		s.JetStream.OrderedDelivered, s.JetStream.LastIndexDevices, s.JetStream.LastIndexDropped = os.Delivered, os.LastIndexDevices, os.LastIndexDropped
		s.JetStream.OrderedReadBytes = os.ReadBytes
		if n.dedup != nil {
			s.JetStream.MsgIDs, s.JetStream.MaxMsgIDs = n.dedup.Len(), n.cfg.JetStream.MaxMsgIDs
			s.JetStream.Duplicates, s.JetStream.MsgIDsEvicted = n.dedup.Duplicates.Load(), n.dedup.Evicted.Load()
		}
	}
	s.NATS = metrics.NATSStats{
		Connections: cs.Connections.Load(), TotalConnections: cs.TotalConnections.Load(), Refused: cs.Refused.Load(),
		AuthFailures: cs.AuthFailures.Load(), ProtocolErrors: cs.ProtocolErrors.Load(),
		InMsgs: cs.InMsgs.Load(), InBytes: cs.InBytes.Load(), OutMsgs: cs.OutMsgs.Load(), OutBytes: cs.OutBytes.Load(),
		IngestErrors: cs.IngestErrors.Load(), BadDevice: cs.BadDevice.Load(), BadAcks: cs.BadAcks.Load(),
		SlowConsumers: cs.Closed(natsserver.ClosedSlowConsumer), WriteTimeouts: cs.Closed(natsserver.ClosedWriteTimeout),
		Stale: cs.Closed(natsserver.ClosedStale), ForeignAcks: cs.ForeignAcks.Load(),
		TLSFailures: cs.Closed(natsserver.ClosedTLSHandshake), GroupsRefused: cs.GroupsRefused.Load(),
		PermViolations: cs.PermViolations.Load(),
	}
	for _, r := range natsserver.CloseReasons() {
		s.NATS.Closed = append(s.NATS.Closed, metrics.ReasonCount{Reason: r.String(), N: cs.Closed(r)})
	}
	if n.nsq != nil {
		s.NSQ = n.nsqStats()
	}
	n.bridgesMu.RLock()
	defer n.bridgesMu.RUnlock()
	for _, p := range n.serial {
		s.Serial = append(s.Serial, p.Status())
	}
	for _, b := range n.mqtt {
		s.MQTT = append(s.MQTT, b.Status())
	}
	for _, b := range n.modbus {
		s.Modbus = append(s.Modbus, b.Status())
	}
	s.Uplinks = n.uplinkStats(&s)
	if n.events != nil {
		s.Console = n.events.Stats()
	}
	if device {
		s.Device = n.metrics.deviceSamples(now)
	}
	return s
}

func (n *Node) nsqStats() *metrics.NSQStats {
	c := n.nsq.Counters()
	st := &metrics.NSQStats{
		Connections: c.Connections.Load(), TotalConnections: c.TotalConnections.Load(), Refused: c.Refused.Load(),
		AuthFailures: c.AuthFailures.Load(), Published: c.Published.Load(), PublishErrors: c.PubErrors.Load(),
		Delivered: c.Delivered.Load(), Fin: c.Fin.Load(), Req: c.Req.Load(), Touch: c.Touch.Load(),
		UnknownIDs: c.FinFailed.Load(), RdyExceeded: c.RdyExceeded.Load(), SlowConsumers: c.SlowConsumers.Load(),
		TLSFailures: c.TLSFailures.Load(),
	}
	st.RDY, st.InFlight = n.nsq.Flow()
	for code, v := range c.Errors() {
		st.Errors = append(st.Errors, metrics.ReasonCount{Reason: code, N: v})
	}
	sort.Slice(st.Errors, func(i, j int) bool { return st.Errors[i].Reason < st.Errors[j].Reason })
	return st
}

// hotView returns the n busiest devices and the detector's counters, holding
// the detector's lock (which Observe takes on every append) for one walk
// over the tracked devices: Top keeps a heap of n instead of sorting them
// all, so the wait it can cause ingest is bounded by that walk.
func (in *Ingest) hotView(n int) ([]hot.DeviceRate, metrics.HotStats) {
	hs := metrics.HotStats{Moves: in.moves.Load(), MoveErrors: in.moveErrors.Load()}
	if in.hot == nil {
		return nil, hs
	}
	in.hotMu.Lock()
	top := in.hot.Top(n)
	st := in.hot.Stats()
	in.hotMu.Unlock()
	hs.Enabled, hs.Tracked, hs.Isolated, hs.Untracked, hs.HeldBack = true, st.Tracked, st.Hot, st.Untracked, st.HeldBack
	return top, hs
}

// handleMetrics serves /metrics: snapshot, render into a buffer, then write.
// Nothing is locked while the page is formatted or sent, so a slow scraper
// holds up no one.
func (n *Node) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	start := time.Now()
	snap := n.snapshot(n.metrics.top, true)
	buf, _ := n.metrics.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	n.metrics.expo.Write(buf, &snap)
	n.metrics.expo.Observe(time.Since(start))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
	if buf.Cap() <= 4<<20 {
		n.metrics.bufs.Put(buf)
	}
}
