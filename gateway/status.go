package gateway

import (
	"time"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/metrics"
	"edgeq/gateway/nodestats"
)

// Status is the JSON of GET /v1/status; `edgeq status` prints it for people.
type Status struct {
	Node          string            `json:"node"`
	Version       string            `json:"version"`
	Time          time.Time         `json:"time"` // when the snapshot was taken (rates: deltas over this clock)
	UptimeSeconds int64             `json:"uptime_seconds"`
	Ready         bool              `json:"ready"`
	DataDir       string            `json:"data_dir"`
	NATS          string            `json:"nats"`
	HTTP          string            `json:"http"`
	Durability    string            `json:"durability"`
	Log           LogStatus         `json:"log"`
	Partitions    []PartitionStatus `json:"partitions"`
	Groups        []GroupStatus     `json:"groups"`
	HotDevices    []DeviceStatus    `json:"top_devices"`
	Hot           HotStatus         `json:"hot"`
	Sources       map[string]Source `json:"sources"`
	Connections   ConnStatus        `json:"connections"`
	Tail          TailStatus        `json:"live_tail"`
	Serial        []serial.Status   `json:"serial,omitempty"`
	MQTT          []mqtt.Status     `json:"mqtt,omitempty"`
	Modbus        []modbus.Status   `json:"modbus,omitempty"`
	Uplinks       []uplink.Stats    `json:"uplinks,omitempty"`
	Cluster       *ClusterStatus    `json:"cluster,omitempty"`
	// NSQ is the NSQ listener, when it is on.
	NSQ *NSQStatus `json:"nsq,omitempty"`
	// Device is the gateway's health (CPU, load, temperatures, memory, the
	// data directory's disk, this process).
	Device metrics.DeviceHealth `json:"device"`
}

// LogStatus summarizes the log.
type LogStatus struct {
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
	Full     bool  `json:"full"`
	// FullPolicy is wal.full_policy: reject or drop_oldest.
	FullPolicy string `json:"full_policy"`
	// RetentionDropped sums the records of every partition dropped before
	// every consumer (an uplink, a group) had them (drop_oldest).
	RetentionDropped uint64            `json:"retention_dropped"`
	Devices          int               `json:"devices"`
	MaxDevices       int               `json:"max_devices"`
	DiskLow          bool              `json:"disk_low"`
	DiskFault        string            `json:"disk_fault,omitempty"`
	Rejected         map[string]uint64 `json:"rejected"`
}

// PartitionStatus is one partition of the log.
type PartitionStatus struct {
	Partition int    `json:"partition"`
	Hot       bool   `json:"hot"`
	First     uint64 `json:"first"`
	Last      uint64 `json:"last"`
	Durable   uint64 `json:"durable"`
	Bytes     int64  `json:"bytes"`
	Appends   uint64 `json:"appends"`
	Fsyncs    uint64 `json:"fsyncs"`
	Corrupt   uint64 `json:"corrupt_skipped"`
	Dropped   uint64 `json:"retention_dropped"`
	// FsyncP99ms is the 99th percentile fsync time (a bucket bound).
	FsyncP99ms float64 `json:"fsync_p99_ms"`
}

// GroupStatus is one queue group.
type GroupStatus struct {
	Filter       string `json:"filter"`
	Queue        string `json:"queue"`
	Declared     bool   `json:"declared"`
	Members      int    `json:"members"`
	InFlight     int    `json:"in_flight"`
	Pending      int    `json:"pending"`
	Lag          uint64 `json:"lag"` // durable records not yet committed, all partitions
	Delivered    uint64 `json:"delivered"`
	Acked        uint64 `json:"acked"`
	Naks         uint64 `json:"naks"`
	Redeliveries uint64 `json:"redeliveries"`
	DeadLetters  uint64 `json:"dead_letters"`
	Active       int    `json:"active_devices"`
	// LatencyP50ms and LatencyP99ms: ingest→first delivery over the last
	// minute (groups.RecentWindow); 0 when nothing was delivered in it.
	LatencyP50ms float64 `json:"latency_p50_ms"`
	LatencyP99ms float64 `json:"latency_p99_ms"`
	// PartitionLag and WindowSpan are keyed by partition: "3" for this
	// node's, "gw-b/3" for a peer's (on the leader of a cluster group).
	PartitionLag map[string]uint64 `json:"partition_lag"`
	MemberList   []MemberStatus    `json:"member_list"`
	WindowSpan   map[string]int    `json:"window_span"`
	// Window is each partition's read-ahead window: records held, what the
	// busiest device holds (bounded by its share), records set aside.
	Window map[string]WindowStatus `json:"window"`
	// StallsAvoided counts the times a device reached its share of a
	// window and the other devices were read on past it.
	StallsAvoided uint64 `json:"neighbour_stalls_avoided"`
	// Leading: this node delivers the group (always on a standalone node);
	// the delivery figures above are only known there.
	Leading bool `json:"leading"`
	// MembersByNode counts the group's members on each node of the cluster.
	MembersByNode map[string]int `json:"members_by_node,omitempty"`
	// Forwards counts deliveries to members on other nodes.
	Forwards uint64 `json:"forwards"`
}

// WindowStatus is one partition's read-ahead window of a group.
type WindowStatus struct {
	Messages int `json:"messages"`
	Busiest  int `json:"busiest_device"`
	SetAside int `json:"set_aside"`
}

// MemberStatus is one member of a group.
type MemberStatus struct {
	ID       string `json:"id"`
	Credit   int    `json:"credit"`
	InFlight int    `json:"in_flight"`
}

// DeviceStatus is one of the busiest devices.
type DeviceStatus struct {
	Device string  `json:"device"`
	Rate   float64 `json:"rate"`
	Hot    bool    `json:"isolated"`
}

// HotStatus summarizes hot-device isolation.
type HotStatus struct {
	Enabled    bool   `json:"enabled"`
	Tracked    int    `json:"tracked"`
	Isolated   int    `json:"isolated"`
	Moves      uint64 `json:"moves"` // moves to an isolation partition and back
	MoveErrors uint64 `json:"move_errors"`
}

// Source counts one ingest source.
type Source struct {
	Msgs   uint64 `json:"msgs"`
	Bytes  uint64 `json:"bytes"`
	Errors uint64 `json:"errors"`
}

// ConnStatus summarizes NATS connections.
type ConnStatus struct {
	Current       int64  `json:"current"`
	Total         uint64 `json:"total"`
	AuthFailures  uint64 `json:"auth_failures"`
	SlowConsumers uint64 `json:"slow_consumer_closes"`
	WriteTimeouts uint64 `json:"write_timeout_closes"`
	Stale         uint64 `json:"stale_closes"`
	ProtocolErrs  uint64 `json:"protocol_errors"`
}

// NSQStatus summarizes the NSQ listener: connections, the RDY they gave and
// what they hold, publishes and acknowledgements.
type NSQStatus struct {
	Listen        string            `json:"listen"`
	Connections   int64             `json:"connections"`
	RDY           int64             `json:"rdy"`
	InFlight      int64             `json:"in_flight"`
	RdyExceeded   uint64            `json:"rdy_exceeded"`
	Published     uint64            `json:"published"`
	PublishErrors uint64            `json:"publish_errors"`
	Delivered     uint64            `json:"delivered"`
	Fin           uint64            `json:"fin"`
	Req           uint64            `json:"req"`
	Touch         uint64            `json:"touch"`
	UnknownIDs    uint64            `json:"unknown_ids"`
	SlowConsumers uint64            `json:"slow_consumer_closes"`
	TLSFailures   uint64            `json:"tls_failures"`
	Errors        map[string]uint64 `json:"errors"`
}

func nsqStatusOf(n *nodestats.NSQStats, listen string) *NSQStatus {
	if n == nil {
		return nil
	}
	st := &NSQStatus{Listen: listen, Connections: n.Connections, RDY: n.RDY, InFlight: n.InFlight, RdyExceeded: n.RdyExceeded,
		Published: n.Published, PublishErrors: n.PublishErrors, Delivered: n.Delivered, Fin: n.Fin, Req: n.Req, Touch: n.Touch,
		UnknownIDs: n.UnknownIDs, SlowConsumers: n.SlowConsumers, TLSFailures: n.TLSFailures, Errors: map[string]uint64{}}
	for _, c := range n.Errors {
		st.Errors[c.Reason] = c.N
	}
	return st
}

// TailStatus summarizes the live tail.
type TailStatus struct {
	Subscribers int    `json:"subscribers"`
	Delivered   uint64 `json:"delivered"`
	Dropped     uint64 `json:"dropped"`
}

// Status builds the status document from one snapshot, the same one
// /metrics renders: the two never disagree about a moment.
func (n *Node) Status() Status {
	snap := n.snapshot(statusTopDevices, true)
	st := statusOf(&snap)
	st.DataDir, st.NATS, st.HTTP, st.Durability = n.cfg.DataDir, n.NATSAddr(), n.HTTPAddr(), string(n.cfg.WAL.Durability)
	st.NSQ = nsqStatusOf(snap.NSQ, n.NSQAddr())
	return st
}

// statusOf turns a snapshot into the status document (without the node's
// addresses and settings).
func statusOf(s *nodestats.Snapshot) Status {
	ls := s.Log
	st := Status{
		Node: s.Node, Version: s.Version, Time: s.Time, UptimeSeconds: int64(s.Time.Sub(s.StartTime).Seconds()), Ready: s.Ready,
		Log: LogStatus{Bytes: ls.Bytes, MaxBytes: ls.MaxBytes, Full: ls.Full, FullPolicy: string(ls.FullPolicy), Devices: ls.Devices,
			MaxDevices: ls.MaxDevices, Rejected: ls.Rejected, DiskLow: ls.DiskLow, DiskFault: ls.DiskFault},
		Sources: map[string]Source{},
		Device:  devicemetrics.Health(s.Device),
	}
	for _, p := range ls.Partitions {
		st.Log.RetentionDropped += p.Dropped
		st.Partitions = append(st.Partitions, PartitionStatus{Partition: p.Partition, Hot: p.Hot, First: p.First,
			Last: p.Last, Durable: p.Durable, Bytes: p.Bytes, Appends: p.Appends, Fsyncs: p.Fsyncs,
			Corrupt: p.Corrupt, Dropped: p.Dropped, FsyncP99ms: ms(p.FsyncLatency.Quantile(0.99))})
	}
	for _, g := range s.Groups {
		gs := GroupStatus{Filter: g.Key.Filter, Queue: g.Key.Queue, Declared: g.Declared,
			Members: g.Core.Members, InFlight: g.Core.InFlight, Pending: g.Core.Pending,
			Delivered: g.Core.Delivered, Acked: g.Core.Acked, Naks: g.Core.Naks,
			Redeliveries: g.Core.Redeliveries, DeadLetters: g.Core.DeadLetters, Active: g.Core.ActiveDevices,
			LatencyP50ms: ms(g.RecentLatency.Quantile(0.5)), LatencyP99ms: ms(g.RecentLatency.Quantile(0.99)),
			PartitionLag: map[string]uint64{}, WindowSpan: map[string]int{}, Window: map[string]WindowStatus{},
			StallsAvoided: g.Core.StallsAvoided, Leading: g.Leading, Forwards: g.Forwards}
		if len(g.Members) > 0 {
			gs.MembersByNode = g.Members
		}
		if !g.Leading {
			gs.Members = 0
			for _, n := range g.Members {
				gs.Members += n
			}
		}
		for _, p := range g.Core.Partitions {
			name, lag := s.GroupPartition(&g, p.Partition, p.Committed)
			if lag > 0 {
				gs.Lag += lag
				gs.PartitionLag[name] = lag
			}
			gs.WindowSpan[name] = p.Span
			gs.Window[name] = WindowStatus{Messages: p.Held, Busiest: p.Busiest, SetAside: p.SetAside}
		}
		for _, m := range g.Core.MemberList {
			gs.MemberList = append(gs.MemberList, MemberStatus{ID: string(m.ID), Credit: m.Credit, InFlight: m.InFlight})
		}
		st.Groups = append(st.Groups, gs)
	}
	st.Hot = HotStatus{Enabled: s.Hot.Enabled, Tracked: s.Hot.Tracked, Isolated: s.Hot.Isolated, Moves: s.Hot.Moves, MoveErrors: s.Hot.MoveErrors}
	for _, d := range s.TopDevices {
		st.HotDevices = append(st.HotDevices, DeviceStatus{Device: d.Device, Rate: d.Rate, Hot: d.Hot})
	}
	for _, c := range s.Sources {
		st.Sources[c.Name] = Source{Msgs: c.Msgs, Bytes: c.Bytes, Errors: c.Errors}
	}
	cs := s.NATS
	st.Connections = ConnStatus{Current: cs.Connections, Total: cs.TotalConnections,
		AuthFailures: cs.AuthFailures, SlowConsumers: cs.SlowConsumers,
		WriteTimeouts: cs.WriteTimeouts, Stale: cs.Stale, ProtocolErrs: cs.ProtocolErrors}
	st.Serial = s.Serial
	st.MQTT = s.MQTT
	st.Modbus = s.Modbus
	st.Uplinks = s.Uplinks
	st.Tail = TailStatus{Subscribers: s.Tail.Subscribers, Delivered: s.Tail.Delivered, Dropped: s.Tail.Dropped}
	if s.Cluster != nil {
		st.Cluster = clusterStatusOf(s.Cluster, s.Dispatch)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
