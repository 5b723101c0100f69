package devicemetrics

import "fmt"

// cpuCollector reports system CPU time per mode from <proc>/stat.
type cpuCollector struct {
	procRoot string
}

var _ Collector = cpuCollector{}

func (cpuCollector) Name() string { return "cpu" }

const (
	cpuSecondsName = "edgeq_device_cpu_seconds_total"
	cpuSecondsHelp = "Seconds all CPUs spent in each mode, summed over CPUs (guest time is included in user and nice)."
	cpusOnlineName = "edgeq_device_cpus_online"
	cpusOnlineHelp = "Number of CPUs listed in /proc/stat, to normalise load and CPU seconds."
)

func (c cpuCollector) Collect(dst []Sample) ([]Sample, error) {
	fs, err := openProcFS(c.procRoot)
	if err != nil {
		return dst, err
	}
	st, err := fs.Stat()
	if err != nil {
		return dst, fmt.Errorf("read cpu stat: %w", err)
	}
	if len(st.CPU) == 0 {
		return dst, fmt.Errorf("read cpu stat from %s: no per-cpu lines", c.procRoot)
	}
	t := st.CPUTotal
	// Guest and guest_nice are left out: the kernel already counts them in
	// user and nice, so adding them would count that time twice.
	modes := [...]struct {
		mode    string
		seconds float64
	}{
		{"user", t.User}, {"nice", t.Nice}, {"system", t.System}, {"idle", t.Idle},
		{"iowait", t.Iowait}, {"irq", t.IRQ}, {"softirq", t.SoftIRQ}, {"steal", t.Steal},
	}
	for _, m := range modes {
		dst = append(dst, counter(cpuSecondsName, cpuSecondsHelp, m.seconds, Label{"mode", m.mode}))
	}
	dst = append(dst, gauge(cpusOnlineName, cpusOnlineHelp, float64(len(st.CPU))))
	return dst, nil
}
