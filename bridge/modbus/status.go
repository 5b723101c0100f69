package modbus

import (
	"strconv"
	"time"

	"edgeq/internal/hist"
)

// Status is one bus's state for /v1/status and /metrics.
type Status struct {
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
	Stored        uint64 `json:"stored"`
	StorageErrors uint64 `json:"storage_errors"`
	StorageWaits  uint64 `json:"storage_waits"`
	Pending       int64  `json:"pending"`
	// Latency of the requests that were answered.
	Latency hist.Snapshot  `json:"-"`
	Devices []DeviceStatus `json:"devices"`
}

// DeviceStatus is one slave's counters.
type DeviceStatus struct {
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

// Status returns a snapshot; safe to call at any time.
func (b *Bus) Status() Status {
	b.mu.Lock()
	st := b.state
	b.mu.Unlock()
	s := Status{
		Name: b.cfg.Name, Kind: "tcp", Resolved: st.resolved, Open: st.open,
		LastError: st.lastErr, LastErrorTime: st.lastErrTime,
		Opens: b.opens.Load(), OpenFailures: b.openFailures.Load(),
		Stored: b.stored.Load(), StorageErrors: b.storageErrors.Load(), StorageWaits: b.storageWaits.Load(),
		Pending: b.outstanding.Load(), Latency: b.latency.Snapshot(),
	}
	s.Reopens = max(s.Opens, 1) - 1
	if b.cfg.RTU != nil {
		s.Kind, s.Address = "rtu", b.cfg.RTU.Path
	} else {
		s.Address = b.cfg.TCP.Address
	}
	s.Devices = make([]DeviceStatus, len(b.devs))
	for i, d := range b.devs {
		s.Devices[i] = d.status()
	}
	return s
}

func (d *device) status() DeviceStatus {
	ds := DeviceStatus{
		Unit: d.cfg.Unit, Device: d.cfg.Device,
		Polls: d.polls.Load(), FailedPolls: d.failedPolls.Load(), Requests: d.requests.Load(),
		Retries: d.retries.Load(), Unchanged: d.unchanged.Load(),
		Errors:      make(map[string]uint64, numErrorKinds),
		LastLatency: time.Duration(d.lastLatency.Load()),
	}
	for k := range numErrorKinds {
		ds.Errors[k.String()] = d.errs[k].Load()
	}
	d.mu.Lock()
	if len(d.exceptions) > 0 {
		ds.Exceptions = make(map[string]uint64, len(d.exceptions))
		for c, n := range d.exceptions {
			ds.Exceptions[strconv.Itoa(int(c))] = n
		}
	}
	ds.LastGood, ds.LastError, ds.LastErrorTime = d.lastGood, d.lastErr, d.lastErrAt
	d.mu.Unlock()
	return ds
}
