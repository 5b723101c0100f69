package metrics

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/discovery/election"
	"edgeq/gateway/cluster"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/dispatch"
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

	Groups   []dispatch.GroupStats // sorted by key
	Dispatch dispatch.Counters
	Tail     dispatch.TailStats
	NATS     NATSStats

	Serial []serial.Status
	MQTT   []mqtt.Status

	// Device are the device metrics of this scrape, edgeq_collector_success
	// included (devicemetrics.CollectAll).
	Device []devicemetrics.Sample

	// Cluster is nil on a standalone node.
	Cluster *ClusterStats
}

// ClusterStats is the cluster part of a snapshot: peer connections, the
// election, and the counters of the data path between nodes that are not
// in Dispatch (forwards, relayed acks and remote commits are).
type ClusterStats struct {
	Name   string // the cluster's name
	Listen string // this node's peer listener
	// Peers are the connected peers, sorted by node; Unreachable the
	// addresses to dial without a connection, sorted by address.
	Peers       []cluster.PeerStatus
	Unreachable []cluster.AddrStatus
	Manager     cluster.Counters
	Election    election.Stats
	// FencedRequests counts fetches and commits of other nodes' leaders
	// this node refused as a partition owner (stale epoch, or the epochs
	// could not be persisted).
	FencedRequests uint64
	// Leaders are the elected leaders of Groups (a group without one is
	// being elected).
	Leaders map[dispatch.GroupKey]Leader
}

// Leader is a queue group's elected leader.
type Leader struct {
	Node  string
	Epoch election.Epoch
	// Self: this node was elected and has not finished stepping down.
	Self bool
}

// DownPeers are the nodes that unreachable addresses led to and that have
// no connection, sorted and without repeats.
func (c *ClusterStats) DownPeers() []string {
	var out []string
	for _, a := range c.Unreachable {
		if a.Node == "" || slices.Contains(out, a.Node) {
			continue
		}
		if _, up := slices.BinarySearchFunc(c.Peers, a.Node, func(p cluster.PeerStatus, n string) int { return strings.Compare(p.Node, n) }); !up {
			out = append(out, a.Node)
		}
	}
	slices.Sort(out)
	return out
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
}

// NATSStats is a copy of natsserver.Stats.
type NATSStats struct {
	Connections                         int64 // open now
	TotalConnections, Refused           uint64
	AuthFailures, ProtocolErrors        uint64
	InMsgs, InBytes, OutMsgs, OutBytes  uint64
	IngestErrors, BadDevice, BadAcks    uint64
	SlowConsumers, WriteTimeouts, Stale uint64 // connections closed, by reason
	TLSFailures                         uint64 // closed: TLS handshake failed
	GroupsRefused                       uint64 // queue subscribes over max_groups_per_connection
	PermViolations                      uint64 // publishes and subscribes a user may not make
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
func (s *Snapshot) GroupPartition(g *dispatch.GroupStats, p int, committed uint64) (name string, lag uint64) {
	ref, remote := g.Partitions[p]
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
