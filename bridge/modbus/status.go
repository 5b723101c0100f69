package modbus

import (
	"strconv"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/internal/hist"
)

// Status is one bus's state for /v1/status (the API's document) and
// /metrics (with the request latency).
type Status struct {
	apiv1.ModbusStatus
	// Latency of the requests that were answered.
	Latency hist.Snapshot `json:"-"`
}

// DeviceStatus is one slave's counters.
type DeviceStatus = apiv1.ModbusDeviceStatus

// Status returns a snapshot; safe to call at any time.
func (b *Bus) Status() Status {
	b.mu.Lock()
	st := b.state
	b.mu.Unlock()
	s := Status{ModbusStatus: apiv1.ModbusStatus{
		Name: b.cfg.Name, Kind: "tcp", Resolved: st.resolved, Open: st.open,
		LastError: st.lastErr, LastErrorTime: st.lastErrTime,
		Opens: b.opens.Load(), OpenFailures: b.openFailures.Load(),
		Stored: b.stored.Load(), StorageErrors: b.storageErrors.Load(), StorageWaits: b.storageWaits.Load(),
		Pending: b.outstanding.Load(),
	}, Latency: b.latency.Snapshot()}
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
