package apiv1

import "time"

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
	Serial        []SerialStatus    `json:"serial,omitempty"`
	MQTT          []MQTTStatus      `json:"mqtt,omitempty"`
	Modbus        []ModbusStatus    `json:"modbus,omitempty"`
	Uplinks       []UplinkStatus    `json:"uplinks,omitempty"`
	Cluster       *ClusterStatus    `json:"cluster,omitempty"`
	// NSQ is the NSQ listener, when it is on.
	NSQ *NSQStatus `json:"nsq,omitempty"`
	// Device is the gateway's health (CPU, load, temperatures, memory, the
	// data directory's disk, this process).
	Device DeviceHealth `json:"device"`
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

// TailStatus summarizes the live tail.
type TailStatus struct {
	Subscribers int    `json:"subscribers"`
	Delivered   uint64 `json:"delivered"`
	Dropped     uint64 `json:"dropped"`
}
