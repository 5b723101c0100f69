package devicemetrics

import "testing"

func TestLoadCollectorOnFixture(t *testing.T) {
	// testdata/proc/loadavg: "0.52 0.58 0.59 2/214 31415"
	got := collectOK(t, loadCollector{procRoot: fixtureProc})
	assertRendered(t, got, `gauge edgeq_device_load1 0.52
gauge edgeq_device_load5 0.58
gauge edgeq_device_load15 0.59
`)
}
