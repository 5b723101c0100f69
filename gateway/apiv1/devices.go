package apiv1

import "time"

// DeviceView is the answer to GET /v1/devices/{device}.
type DeviceView struct {
	Device string `json:"device"`
	// Known: the log holds (or held) records of the device on this node.
	Known bool `json:"known"`
	// Partition is where its next record goes; Home the partition it
	// hashes to (they differ while it is isolated as hot).
	Partition int    `json:"partition"`
	Home      int    `json:"home_partition"`
	LastSeq   uint64 `json:"last_seq"`
	Moves     uint64 `json:"moves"`
	// Rate is msgs/s over the hot-detection window (absent when the
	// detector does not track the device: isolation off, or idle).
	Rate     *float64 `json:"rate,omitempty"`
	Isolated bool     `json:"isolated"`
	// Groups says, per queue group this node delivers, how far behind it
	// is in the device's partitions.
	Groups []DeviceGroup `json:"groups"`
	// Records are the device's newest records, newest first.
	Records []DeviceRecord `json:"records"`
	// Scanned counts what the lookup read; Complete is false when the
	// byte budget ran out before the requested records were found.
	ScannedRecords int  `json:"scanned_records"`
	ScannedBytes   int  `json:"scanned_bytes"`
	Complete       bool `json:"complete"`
}

// DeviceGroup is one group's position in the device's partitions.
type DeviceGroup struct {
	Filter string `json:"filter"`
	Queue  string `json:"queue"`
	// Committed is the group's committed offset by partition; Lag what the
	// group has not finished of each partition (all devices).
	Committed    map[string]uint64 `json:"committed"`
	PartitionLag map[string]uint64 `json:"partition_lag"`
	// Behind counts the returned records of this device the group has not
	// finished (committed); DoneSeq is the newest of them it has.
	Behind  int    `json:"behind"`
	DoneSeq uint64 `json:"done_seq"`
}

// DeviceRecord is one stored record.
type DeviceRecord struct {
	Partition int               `json:"partition"`
	Offset    uint64            `json:"offset"`
	Kind      string            `json:"kind"`
	Seq       uint64            `json:"seq"`
	Time      time.Time         `json:"time"`
	Source    string            `json:"source"`
	Headers   map[string]string `json:"headers,omitempty"`
	Size      int               `json:"size"`
	// Payload is the payload as text when it is UTF-8, else PayloadBase64
	// is set; both are cut at 4 KiB (Truncated).
	Payload       string `json:"payload,omitempty"`
	PayloadBase64 []byte `json:"payload_base64,omitempty"`
	Truncated     bool   `json:"truncated,omitempty"`
	MoveTarget    *int   `json:"move_target,omitempty"`
}
