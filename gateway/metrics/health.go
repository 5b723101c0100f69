package metrics

import "slices"

// DeviceHealth is the gateway's health for /v1/status and `edgeq status`,
// read from the device samples of the same snapshot (devicemetrics.Health). A value whose
// collector failed is absent (null), never 0; Failed names those collectors.
//
// CPU use needs two readings: the seconds are cumulative since boot, so a
// viewer divides the busy delta by the total delta between refreshes
// (CPUPercent).
type DeviceHealth struct {
	CPUs            *int     `json:"cpus,omitempty"`
	CPUBusySeconds  *float64 `json:"cpu_busy_seconds,omitempty"`  // all CPUs, every mode but idle and iowait
	CPUTotalSeconds *float64 `json:"cpu_total_seconds,omitempty"` // all CPUs, all modes
	Load1           *float64 `json:"load1,omitempty"`
	Load5           *float64 `json:"load5,omitempty"`
	Load15          *float64 `json:"load15,omitempty"`

	MemoryTotalBytes     *uint64 `json:"memory_total_bytes,omitempty"`
	MemoryAvailableBytes *uint64 `json:"memory_available_bytes,omitempty"`
	// The data directory's filesystem; Avail is what edgeq can still write.
	DiskSizeBytes  *uint64 `json:"disk_size_bytes,omitempty"`
	DiskAvailBytes *uint64 `json:"disk_avail_bytes,omitempty"`

	ProcessRSSBytes *uint64 `json:"process_rss_bytes,omitempty"`
	OpenFDs         *uint64 `json:"open_fds,omitempty"`
	MaxFDs          *uint64 `json:"max_fds,omitempty"`

	// Temperatures of the readable thermal zones, in zone order.
	Temperatures []Temperature `json:"temperatures,omitempty"`
	// Failed lists the collectors that failed in this snapshot.
	Failed []string `json:"failed_collectors,omitempty"`
}

// Temperature is one thermal zone.
type Temperature struct {
	Zone    string  `json:"zone"`
	Type    string  `json:"type"`
	Celsius float64 `json:"celsius"`
}

// CPUTemperature is the zone that best stands for the CPU: the Raspberry
// Pi's cpu-thermal (or x86_pkg_temp) when there is one, else the hottest.
func (h DeviceHealth) CPUTemperature() (Temperature, bool) {
	if len(h.Temperatures) == 0 {
		return Temperature{}, false
	}
	for _, t := range h.Temperatures {
		if t.Type == "cpu-thermal" || t.Type == "x86_pkg_temp" || t.Type == "soc-thermal" {
			return t, true
		}
	}
	return slices.MaxFunc(h.Temperatures, func(a, b Temperature) int {
		switch {
		case a.Celsius < b.Celsius:
			return -1
		case a.Celsius > b.Celsius:
			return 1
		}
		return 0
	}), true
}

// CPUPercent is the share of CPU time spent busy between two readings, 0 to
// 100 (of all CPUs together); false when either reading lacks the CPU
// seconds or no time passed between them.
func CPUPercent(prev, cur DeviceHealth) (float64, bool) {
	if prev.CPUBusySeconds == nil || cur.CPUBusySeconds == nil || prev.CPUTotalSeconds == nil || cur.CPUTotalSeconds == nil {
		return 0, false
	}
	dt := *cur.CPUTotalSeconds - *prev.CPUTotalSeconds
	if dt <= 0 {
		return 0, false
	}
	p := 100 * (*cur.CPUBusySeconds - *prev.CPUBusySeconds) / dt
	return min(max(p, 0), 100), true
}
