package gateway

import (
	"bytes"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/cluster"
	"edgeq/gateway/config"
	"edgeq/gateway/console"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/metrics"
	"edgeq/gateway/nodestats"
	"edgeq/gateway/nsqserver"
	"edgeq/wal"
)

// statusTopDevices is how many busy devices /v1/status lists.
const statusTopDevices = 10

// collectorLogEvery bounds how often one collector's unchanged failure is
// logged: a missing sensor fails on every scrape.
const collectorLogEvery = 10 * time.Minute

// nodeMetrics is the node's part of /metrics and of the device health in
// /v1/status: the registry of collectors, the device collectors and the
// log of their failures.
type nodeMetrics struct {
	regOnce    sync.Once
	reg        *metrics.Registry
	collectors []devicemetrics.Collector
	top        int

	failures devicemetrics.FailureLog

	bufs sync.Pool // *bytes.Buffer
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
		collectors: cs, top: cfg.Metrics.TopDevices,
		failures: devicemetrics.FailureLog{Logger: logger.With("component", "metrics"), Every: collectorLogEvery},
	}, nil
}

// deviceSamples runs the device collectors. A collector that fails shows as
// edgeq_collector_success 0 and is logged when it starts failing, when its
// error changes, and at most every collectorLogEvery otherwise; it never
// fails the scrape.
func (m *nodeMetrics) deviceSamples(now time.Time) []devicemetrics.Sample {
	return m.failures.CollectAll(m.collectors, now)
}

// registry is the node's /metrics page: every component's collector, in
// the page's order, made on the first scrape (the node's parts exist by
// then). The log's and the queue groups' stats are read once per scrape
// and shared by the collectors that derive figures from them (group and
// uplink lag, the cluster's groups, refusals), so every family of a scrape
// tells of the same moment. Locks taken, each for a copy: the log's device
// table, the source table, each group's last stats snapshot (refreshed by
// the group's own goroutine; a scrape never waits for a group), the
// hot-device detector for one bounded top-N walk, in a cluster the peer
// table and the elector (once for all groups; it holds its lock while it
// persists epochs, so a scrape during an election may wait for that
// fsync), and the bridge lists. The device collectors read files outside
// every lock.
func (n *Node) registry() *metrics.Registry {
	n.metrics.regOnce.Do(func() {
		logStats := metrics.NewShared(n.log.Stats)
		groupStats := metrics.NewShared(n.queues.Stats)
		devices := metrics.NewShared(func() []devicemetrics.Sample { return n.metrics.deviceSamples(time.Now()) })
		cs := n.nats.Counters()
		n.metrics.reg = metrics.NewRegistry(
			metrics.NodeInfo{Node: n.id, Version: n.version, Start: n.started, Ready: n.ready.Load},
			n.ingest.collector(func() int { return n.metrics.top }, logStats.Get, cs.BadDevice.Load),
			wal.Collector(logStats.Get),
			groups.Collector(n.id, logStats.Get, groupStats.Get, n.queues, n.tail),
			cluster.Collector(n.cluster, groupStats.Get, n.queues.Counters),
			n.nats.Collector(),
			console.Collector(n.events),
			nsqserver.Collector(n.nsq),
			jsapi.Collector(n.js, n.dedup, cs.BadPulls.Load),
			metrics.CollectorFunc(func(w *metrics.Writer) {
				b := n.bridgeStats(&nodestats.Snapshot{Node: n.id, Log: logStats.Get(w), Groups: groupStats.Get(w)})
				mqtt.WriteMetrics(w, b.mqtt)
				serial.WriteMetrics(w, b.serial)
				modbus.WriteMetrics(w, b.modbus)
				uplink.WriteMetrics(w, b.uplinks)
			}),
			devicemetrics.MetricsCollector(devices.Get),
		)
	})
	return n.metrics.reg
}

// bridges are the bridges' and uplinks' stats of one moment.
type bridges struct {
	serial  []serial.Status
	mqtt    []mqtt.Status
	modbus  []modbus.Status
	uplinks []uplink.Stats
}

// bridgeStats copies the bridges' and uplinks' stats, the uplinks' lag
// from s (the log and groups of the same scrape), holding bridgesMu, which
// a reload takes to change the lists.
func (n *Node) bridgeStats(s *nodestats.Snapshot) bridges {
	n.bridgesMu.RLock()
	defer n.bridgesMu.RUnlock()
	var b bridges
	for _, p := range n.serial {
		b.serial = append(b.serial, p.Status())
	}
	for _, m := range n.mqtt {
		b.mqtt = append(b.mqtt, m.Status())
	}
	for _, m := range n.modbus {
		b.modbus = append(b.modbus, m.Status())
	}
	b.uplinks = n.uplinkStats(s)
	return b
}

// handleMetrics serves /metrics: run the collectors into a buffer, then
// write. Nothing is locked while the page is sent, so a slow scraper holds
// up no one.
func (n *Node) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	start := time.Now()
	buf, _ := n.metrics.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	reg := n.registry()
	reg.Write(buf, start)
	reg.Observe(time.Since(start))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
	if buf.Cap() <= 4<<20 {
		n.metrics.bufs.Put(buf)
	}
}
