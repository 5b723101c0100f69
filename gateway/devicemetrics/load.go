package devicemetrics

import "fmt"

// loadCollector reports the 1, 5 and 15 minute load averages from
// <proc>/loadavg.
type loadCollector struct {
	procRoot string
}

var _ Collector = loadCollector{}

func (loadCollector) Name() string { return "load" }

func (c loadCollector) Collect(dst []Sample) ([]Sample, error) {
	fs, err := openProcFS(c.procRoot)
	if err != nil {
		return dst, err
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return dst, fmt.Errorf("read load average: %w", err)
	}
	return append(dst,
		gauge("edgeq_device_load1", "1 minute load average (runnable and uninterruptible tasks).", l.Load1),
		gauge("edgeq_device_load5", "5 minute load average (runnable and uninterruptible tasks).", l.Load5),
		gauge("edgeq_device_load15", "15 minute load average (runnable and uninterruptible tasks).", l.Load15),
	), nil
}
