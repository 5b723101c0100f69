package gateway

import "testing"

// BenchmarkStatusFrame is what the console costs the node per interval,
// whatever the number of open streams: one snapshot (device collectors
// included), encoded once.
func BenchmarkStatusFrame(b *testing.B) {
	n := benchNode(b, 10_000)
	b.ReportAllocs()
	size := 0
	for b.Loop() {
		f, err := n.api.StatusFrame()
		if err != nil {
			b.Fatal(err)
		}
		size = len(f)
	}
	b.ReportMetric(float64(size), "bytes/frame")
}
