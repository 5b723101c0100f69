package devicemetrics

import (
	"errors"
	"fmt"
)

// memoryCollector reports total and available memory from <proc>/meminfo.
// In a container without LXCFS these are the host's values.
type memoryCollector struct {
	procRoot string
}

var _ Collector = memoryCollector{}

func (memoryCollector) Name() string { return "memory" }

// errNoMemoryFields is returned when meminfo parses but has neither field we
// report; publishing nothing with success 1 would hide it.
var errNoMemoryFields = errors.New("meminfo has neither MemTotal nor MemAvailable")

func (c memoryCollector) Collect(dst []Sample) ([]Sample, error) {
	fs, err := openProcFS(c.procRoot)
	if err != nil {
		return dst, err
	}
	m, err := fs.Meminfo()
	if err != nil {
		return dst, fmt.Errorf("read meminfo: %w", err)
	}
	// The procfs fields are pointers: a field the kernel does not print
	// (MemAvailable before Linux 3.14) is nil and is left out, not reported as 0.
	if m.MemTotalBytes == nil && m.MemAvailableBytes == nil {
		return dst, fmt.Errorf("read meminfo under %s: %w", c.procRoot, errNoMemoryFields)
	}
	if m.MemTotalBytes != nil {
		dst = append(dst, gauge("edgeq_device_memory_total_bytes",
			"Usable RAM (MemTotal); the host's in a container.", float64(*m.MemTotalBytes)))
	}
	if m.MemAvailableBytes != nil {
		dst = append(dst, gauge("edgeq_device_memory_available_bytes",
			"Memory available for new work without swapping (MemAvailable); the host's in a container.", float64(*m.MemAvailableBytes)))
	}
	return dst, nil
}
