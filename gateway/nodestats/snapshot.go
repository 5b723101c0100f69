// Package nodestats is a node's stats at one moment, copied out of its
// components for /v1/status (and the console, which shows the status):
// the status document's view of the node, a value with no locks and no
// pointers into live state. /metrics does not read it: each component
// writes its own families (see gateway/metrics).
package nodestats

import (
	"time"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/cluster"
	"edgeq/gateway/console"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/groups"
	"edgeq/gateway/hot"
	"edgeq/gateway/ingeststats"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/metrics"
	"edgeq/gateway/natsserver"
	"edgeq/gateway/nsqserver"
	"edgeq/wal"
)

// Snapshot is everything /v1/status shows, copied out of the node. It
// holds values only (the slices it holds are snapshots nobody mutates
// afterwards).
type Snapshot struct {
	Node      string
	Version   string
	Ready     bool
	StartTime time.Time
	Time      time.Time // when the snapshot was taken

	Log     wal.Stats
	Sources []Source // sorted by name
	Hot     HotStats
	// TopDevices are the busiest devices by rate (at most the configured
	// top-N), highest first.
	TopDevices []hot.DeviceRate

	Groups    []groups.GroupStats // sorted by key
	Dispatch  groups.Counters
	Tail      groups.TailStats
	NATS      NATSStats
	JetStream JetStreamStats
	// NSQ is nil when the NSQ listener is off.
	NSQ *NSQStats

	Serial []serial.Status
	MQTT   []mqtt.Status
	Modbus []modbus.Status
	// Uplinks are the node's uplinks, LagRecords filled from their groups.
	Uplinks []uplink.Stats

	// Device are the device metrics of this snapshot, edgeq_collector_success
	// included (devicemetrics.CollectAll).
	Device []devicemetrics.Sample

	// Cluster is nil on a standalone node.
	Cluster *cluster.Stats

	// Console counts the console's event streams (zero without HTTP).
	Console console.Stats
}

// The components' own snapshots, by the names the status code knows them.
type (
	Source         = ingeststats.Source
	HotStats       = ingeststats.HotStats
	NATSStats      = natsserver.StatsSnapshot
	NSQStats       = nsqserver.StatsSnapshot
	JetStreamStats = jsapi.StatsSnapshot
	ReasonCount    = metrics.ReasonCount
)

// GroupPartition names partition p of group g ("3" for this node's, "gw-b/3"
// for a peer's in a cluster) and tells its lag (groups.LagOf).
func (s *Snapshot) GroupPartition(g *groups.GroupStats, p int, committed uint64) (name string, lag uint64) {
	return groups.LagOf(s.Node, &s.Log, g, p, committed)
}

// PartitionLag is what a group that committed committed has not of this
// node's partition p: durable records past it.
func (s *Snapshot) PartitionLag(p int, committed uint64) uint64 {
	if d := s.Log.DurableOf(p); d > committed {
		return d - committed
	}
	return 0
}
