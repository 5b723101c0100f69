package devicemetrics

import "testing"

func TestCPUCollectorOnFixture(t *testing.T) {
	// testdata/proc/stat: "cpu  182736 1024 95310 8123456 20417 0 3312 0 0 0"
	// in USER_HZ (1/100 s), and four cpuN lines.
	got := collectOK(t, cpuCollector{procRoot: fixtureProc})
	assertRendered(t, got, `counter edgeq_device_cpu_seconds_total{mode="user"} 1827.36
counter edgeq_device_cpu_seconds_total{mode="nice"} 10.24
counter edgeq_device_cpu_seconds_total{mode="system"} 953.1
counter edgeq_device_cpu_seconds_total{mode="idle"} 81234.56
counter edgeq_device_cpu_seconds_total{mode="iowait"} 204.17
counter edgeq_device_cpu_seconds_total{mode="irq"} 0
counter edgeq_device_cpu_seconds_total{mode="softirq"} 33.12
counter edgeq_device_cpu_seconds_total{mode="steal"} 0
gauge edgeq_device_cpus_online 4
`)
}
