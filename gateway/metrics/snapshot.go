package metrics

import (
	"edgeq/bridge/uplink"
	"strconv"
	"time"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/gateway/cluster"
	"edgeq/gateway/console"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/groups"
	"edgeq/gateway/hot"
	"edgeq/wal"
)

// Snapshot is everything one scrape shows, copied out of the node before
// rendering. It holds values only: no locks, no pointers into live state
// (the slices it holds are snapshots nobody mutates afterwards).
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

	// Device are the device metrics of this scrape, edgeq_collector_success
	// included (devicemetrics.CollectAll).
	Device []devicemetrics.Sample

	// Cluster is nil on a standalone node.
	Cluster *cluster.Stats

	// Console counts the console's event streams (zero without HTTP).
	Console console.Stats
}

// Source counts one ingest source's appends (gateway.Ingest.Sources).
type Source struct {
	Name                string
	Msgs, Bytes, Errors uint64
}

// HotStats describe hot-device isolation.
type HotStats struct {
	Enabled           bool
	Tracked, Isolated int
	Untracked         uint64 // devices beyond the tracking bound
	Moves, MoveErrors uint64
	// HeldBack counts evaluations that kept a cooled device isolated
	// because of its backlog in the hot partition.
	HeldBack uint64
}

// NATSStats is a copy of natsserver.Stats.
type NATSStats struct {
	Connections                         int64 // open now
	TotalConnections, Refused           uint64
	AuthFailures, ProtocolErrors        uint64
	InMsgs, InBytes, OutMsgs, OutBytes  uint64
	IngestErrors, BadDevice, BadAcks    uint64
	SlowConsumers, WriteTimeouts, Stale uint64 // connections closed, by reason (also in Closed)
	ForeignAcks                         uint64 // acks from a connection that did not hold the message
	TLSFailures                         uint64 // closed: TLS handshake failed (also in Closed)
	GroupsRefused                       uint64 // queue subscribes over max_groups_per_connection
	PermViolations                      uint64 // publishes and subscribes a user may not make
	Closed                              []ReasonCount
}

// NSQStats is a copy of nsqserver.Stats and its flow gauges.
type NSQStats struct {
	Connections               int64 // open now
	TotalConnections, Refused uint64
	AuthFailures              uint64
	Published, PublishErrors  uint64
	Delivered                 uint64
	Fin, Req, Touch           uint64
	UnknownIDs                uint64 // FIN, REQ or TOUCH of an ID the connection does not hold
	RdyExceeded               uint64 // deliveries beyond a connection's RDY (stays 0)
	SlowConsumers             uint64
	TLSFailures               uint64        // closed: TLS required and not asked for, or the handshake failed
	RDY, InFlight             int64         // summed over connections
	Errors                    []ReasonCount // error frames by code, sorted
}

// JetStreamStats describe the JetStream API (all zero when it is off).
type JetStreamStats struct {
	Enabled             bool
	APICalls, APIErrors uint64
	Consumers           int
	// ConsumersDeleted by CONSUMER.DELETE, ConsumersExpired after their
	// inactive_threshold (ephemeral ones).
	ConsumersDeleted, ConsumersExpired uint64
	BadPulls                           uint64 // pull requests refused
	MsgIDs, MaxMsgIDs                  int    // Nats-Msg-Id values held for deduplication, and their bound
	Duplicates, MsgIDsEvicted          uint64
	// Ordered consumers (ack none: reads of the log): active, their bound,
	// created, expired, refused at the bound, messages delivered.
	Ordered, MaxOrdered                                              int
	OrderedCreated, OrderedExpired, OrderedRefused, OrderedDelivered uint64
	// The last-value index: devices held, devices left out at its bound.
	LastIndexDevices int
	LastIndexDropped uint64
	OrderedReadBytes int64 // what ordered consumers' reads hold now
}

// ReasonCount is one labelled count.
type ReasonCount struct {
	Reason string
	N      uint64
}

// Durable is partition p's durable offset in the snapshot (0 when the log
// has no such partition).
func (s *Snapshot) Durable(p int) uint64 {
	if p >= 0 && p < len(s.Log.Partitions) && s.Log.Partitions[p].Partition == p {
		return s.Log.Partitions[p].Durable
	}
	for _, ps := range s.Log.Partitions {
		if ps.Partition == p {
			return ps.Durable
		}
	}
	return 0
}

// PartitionLag is what group g has not committed in partition p: durable
// records past its committed offset.
func (s *Snapshot) PartitionLag(p int, committed uint64) uint64 {
	if d := s.Durable(p); d > committed {
		return d - committed
	}
	return 0
}

// GroupPartition names partition p of group g ("3" for this node's, "gw-b/3"
// for a peer's in a cluster) and tells its lag: for a peer's partition the
// owner's durable offset as the leader last heard it.
func (s *Snapshot) GroupPartition(g *groups.GroupStats, p int, committed uint64) (name string, lag uint64) {
	ref, remote := g.Partitions[p]
	if d, ok := g.Durable[p]; ok {
		// The durable offset read with committed: the lag at one moment.
		name = strconv.Itoa(p)
		if remote {
			name = ref.Node + "/" + strconv.Itoa(ref.Partition)
			if ref.Node == s.Node {
				name = strconv.Itoa(ref.Partition)
			}
		}
		if d > committed {
			lag = d - committed
		}
		return name, lag
	}
	if !remote || ref.Node == s.Node {
		local := p
		if remote {
			local = ref.Partition
		}
		return strconv.Itoa(local), s.PartitionLag(local, committed)
	}
	if ref.Durable > committed {
		lag = ref.Durable - committed
	}
	return ref.Node + "/" + strconv.Itoa(ref.Partition), lag
}
