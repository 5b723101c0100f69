package devicemetrics

import "edgeq/gateway/apiv1"

// Health reads the gateway's health for /v1/status out of device samples:
// a value whose collector failed is absent (null), never 0.
func Health(samples []Sample) apiv1.DeviceHealth {
	var h apiv1.DeviceHealth
	var busy, total float64
	var cpuSeen bool
	for _, s := range samples {
		v := s.Value
		switch s.Name {
		case "edgeq_device_cpu_seconds_total":
			mode, _ := s.Label("mode")
			total += v
			if mode != "idle" && mode != "iowait" {
				busy += v
			}
			cpuSeen = true
		case "edgeq_device_cpus_online":
			n := int(v)
			h.CPUs = &n
		case "edgeq_device_load1":
			h.Load1 = healthPtr(v)
		case "edgeq_device_load5":
			h.Load5 = healthPtr(v)
		case "edgeq_device_load15":
			h.Load15 = healthPtr(v)
		case "edgeq_device_memory_total_bytes":
			h.MemoryTotalBytes = uptr(v)
		case "edgeq_device_memory_available_bytes":
			h.MemoryAvailableBytes = uptr(v)
		case "edgeq_device_filesystem_size_bytes":
			h.DiskSizeBytes = uptr(v)
		case "edgeq_device_filesystem_avail_bytes":
			h.DiskAvailBytes = uptr(v)
		case "edgeq_process_resident_memory_bytes":
			h.ProcessRSSBytes = uptr(v)
		case "edgeq_process_open_fds":
			h.OpenFDs = uptr(v)
		case "edgeq_process_max_fds":
			h.MaxFDs = uptr(v)
		case "edgeq_device_temperature_celsius":
			zone, _ := s.Label("zone")
			typ, _ := s.Label("type")
			h.Temperatures = append(h.Temperatures, apiv1.Temperature{Zone: zone, Type: typ, Celsius: v})
		case "edgeq_collector_success":
			if v != 1 {
				c, _ := s.Label("collector")
				h.Failed = append(h.Failed, c)
			}
		}
	}
	if cpuSeen {
		h.CPUBusySeconds, h.CPUTotalSeconds = healthPtr(busy), healthPtr(total)
	}
	return h
}

func healthPtr(v float64) *float64 { return &v }

func uptr(v float64) *uint64 {
	u := uint64(max(v, 0))
	return &u
}
