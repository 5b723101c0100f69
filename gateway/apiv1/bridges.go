package apiv1

import "time"

// SerialStatus is one serial port's state for /v1/status.
type SerialStatus struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// ResolvedPath is the device the path pointed at when last opened.
	ResolvedPath  string    `json:"resolved_path,omitempty"`
	Open          bool      `json:"open"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorTime time.Time `json:"last_error_time,omitzero"`
	BytesIn       uint64    `json:"bytes_in"`
	// FramesIn counts every frame cut from the stream: FramesIn = Stored +
	// StorageErrors + the sum of Dropped + Pending.
	FramesIn      uint64            `json:"frames_in"`
	Stored        uint64            `json:"stored"`
	Dropped       map[string]uint64 `json:"dropped"`
	StorageErrors uint64            `json:"storage_errors"`
	Pending       int64             `json:"pending"`
	Opens         uint64            `json:"opens"`
	Reopens       uint64            `json:"reopens"`
	OpenFailures  uint64            `json:"open_failures"`
	// FDRefusals counts opens refused because the port's fds were >= 1024.
	FDRefusals uint64 `json:"fd_refusals"`
	// StorageWaits counts frames that waited for a free append slot.
	StorageWaits uint64 `json:"storage_waits"`
}

// MQTTStatus is one MQTT bridge's state for /v1/status and metrics.
type MQTTStatus struct {
	Name          string       `json:"name"`
	Broker        string       `json:"broker"`
	ClientID      string       `json:"client_id"`
	Connected     bool         `json:"connected"`
	Subscribed    bool         `json:"subscribed"` // the current connection's subscriptions were granted
	LastError     string       `json:"last_error,omitempty"`
	LastErrorTime time.Time    `json:"last_error_time,omitzero"`
	Counters      MQTTCounters `json:"counters"`
}

// MQTTCounters are an MQTT bridge's monotonic counts since New (suitable as Prometheus counters),
// except Queued and Pending, which are gauges.
type MQTTCounters struct {
	Received    uint64 `json:"received"`    // messages delivered by the broker
	Redelivered uint64 `json:"redelivered"` // of them, with the DUP flag set
	Stored      uint64 `json:"stored"`      // records made durable
	Acked       uint64 `json:"acked"`       // QoS 1/2 acks handed to paho
	// Unmappable counts messages without a valid device ID by reason; they are acked.
	Unmappable map[string]uint64 `json:"unmappable"`
	// Rejected counts records the log refused for good by reason; they are acked.
	Rejected map[string]uint64 `json:"rejected"`
	// Dropped counts QoS 0 messages lost by reason (QoS 0 is never redelivered).
	Dropped map[string]uint64 `json:"dropped"`
	// Deferred counts QoS 1/2 messages left unacked so that the broker
	// redelivers them: after a storage error, while stopping, on a full queue.
	Deferred         uint64 `json:"deferred"`
	StorageErrors    uint64 `json:"storage_errors"`    // failed appends (disk full, budget, I/O)
	Connects         uint64 `json:"connects"`          // successful connections, the first included
	Reconnects       uint64 `json:"reconnects"`        // successful connections after the first
	ConnectionsLost  uint64 `json:"connections_lost"`  // connections that dropped
	ForcedReconnects uint64 `json:"forced_reconnects"` // connections closed by the bridge to get redelivery
	SubscribeErrors  uint64 `json:"subscribe_errors"`  // failed or refused subscriptions
	ReadPauses       uint64 `json:"read_pauses"`       // socket reads held back while the queue filled
	Queued           int    `json:"queued"`            // gauge: messages waiting for the appender
	Pending          int    `json:"pending"`           // gauge: appends waiting for durability or their ack
}

// ModbusStatus is one Modbus bus's state for /v1/status and /metrics.
type ModbusStatus struct {
	Name string `json:"name"`
	// Kind is rtu or tcp; Address the serial path or host:port.
	Kind    string `json:"kind"`
	Address string `json:"address"`
	// Resolved is the device the path pointed at when last opened.
	Resolved      string    `json:"resolved,omitempty"`
	Open          bool      `json:"open"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorTime time.Time `json:"last_error_time,omitzero"`
	Opens         uint64    `json:"opens"`
	Reopens       uint64    `json:"reopens"`
	OpenFailures  uint64    `json:"open_failures"`
	// Stored and StorageErrors count records; Pending are being stored.
	Stored        uint64               `json:"stored"`
	StorageErrors uint64               `json:"storage_errors"`
	StorageWaits  uint64               `json:"storage_waits"`
	Pending       int64                `json:"pending"`
	Devices       []ModbusDeviceStatus `json:"devices"`
}

// ModbusDeviceStatus is one slave's counters.
type ModbusDeviceStatus struct {
	Unit   int    `json:"unit"`
	Device string `json:"device"`
	// Polls counts finished polls; FailedPolls those with a register not read.
	Polls       uint64 `json:"polls"`
	FailedPolls uint64 `json:"failed_polls"`
	Requests    uint64 `json:"requests"`
	Retries     uint64 `json:"retries"`
	// Unchanged counts polls not stored (on_change, nothing moved).
	Unchanged uint64 `json:"unchanged"`
	// Errors counts failed requests by kind (timeout, crc, garbled,
	// exception, link, unavailable); Exceptions by exception code.
	Errors        map[string]uint64 `json:"errors"`
	Exceptions    map[string]uint64 `json:"exceptions,omitempty"`
	LastGood      time.Time         `json:"last_good,omitzero"`
	LastLatency   time.Duration     `json:"last_latency_ns"`
	LastError     string            `json:"last_error,omitempty"`
	LastErrorTime time.Time         `json:"last_error_time,omitzero"`
}

// UplinkStatus is one uplink.
type UplinkStatus struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Queue string `json:"queue"`
	// State: starting, up, retrying (the last send failed), down (the
	// transport is not connected).
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	// LagRecords: durable records of the group not yet acknowledged
	// upstream (filled by the node from the group's stats).
	LagRecords uint64 `json:"lag_records"`
	// LagBytes estimates the bytes of those records: each partition's lag
	// in records times its mean stored record size (filled by the node).
	LagBytes uint64 `json:"lag_bytes"`
	// Leading: this node leads the uplink's group (always on a standalone
	// node). Only the leader knows the lag: elsewhere both lags are 0.
	Leading bool `json:"leading"`
	Held    int  `json:"held"` // records queued or awaiting the upstream
	Window  int  `json:"window"`
	// OldestUnsent is the age of the oldest record the uplink holds or failed
	// to send and has not sent since.
	OldestUnsentSeconds float64 `json:"oldest_unsent_seconds"`
	Delivered           uint64  `json:"delivered"`
	Sent                uint64  `json:"sent"`
	Acked               uint64  `json:"acked"`
	AckedBytes          uint64  `json:"acked_bytes"`
	Failed              uint64  `json:"failed"`
	Retried             uint64  `json:"retried"`
	DeadLetters         uint64  `json:"dead_letters"`
	Refused             uint64  `json:"refused"`
	// RetryAfter counts failures after which the uplink waited as the
	// upstream asked (an HTTP Retry-After, capped at retry_after_max).
	RetryAfter uint64 `json:"retry_after"`
	// Records that may have gone out before (sent again after a failure,
	// a crash or a failover) are looked up upstream first (nats):
	// UpstreamChecks counts the reads, AlreadyUpstream the records found
	// there and not sent again, Unverified those sent again that the
	// upstream could not tell about (its duplicate window is their only
	// dedup).
	UpstreamChecks  uint64 `json:"upstream_checks"`
	AlreadyUpstream uint64 `json:"already_upstream"`
	Unverified      uint64 `json:"unverified"`
	LastError       string `json:"last_error,omitempty"`
}
