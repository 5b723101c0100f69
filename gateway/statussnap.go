package gateway

import (
	"time"

	"edgeq/gateway/jsapi"
	"edgeq/gateway/nodestats"
)

// snapshot copies what /v1/status shows (the console shows the status) out
// of the components, each through its own snapshot. /metrics does not read
// it: there each component's collector writes its own families (registry).
// It takes the same short locks as a scrape, each for a copy.
func (n *Node) snapshot(top int, device bool) nodestats.Snapshot {
	now := time.Now()
	s := nodestats.Snapshot{
		Node: n.id, Version: n.version, Ready: n.ready.Load(), StartTime: n.started, Time: now,
		Log: n.log.Stats(),
	}
	s.Sources = n.ingest.sourceStats()
	s.TopDevices, s.Hot = n.ingest.hotView(top)
	s.Groups = n.queues.Stats()
	s.Dispatch = n.queues.Counters()
	if n.cluster != nil {
		s.Cluster = n.cluster.Snapshot(s.Groups)
	}
	s.Tail = n.tail.Stats()
	cs := n.nats.Counters()
	s.NATS = cs.Snapshot()
	s.JetStream = jsapi.Snapshot(n.js, n.dedup, s.NATS.BadPulls)
	if n.nsq != nil {
		s.NSQ = n.nsq.Snapshot()
	}
	b := n.bridgeStats(&s)
	s.Serial, s.MQTT, s.Modbus, s.Uplinks = b.serial, b.mqtt, b.modbus, b.uplinks
	if n.events != nil {
		s.Console = n.events.Stats()
	}
	if device {
		s.Device = n.metrics.deviceSamples(now)
	}
	return s
}
