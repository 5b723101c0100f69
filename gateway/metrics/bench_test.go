package metrics_test

import (
	"bytes"
	"testing"
)

// BenchmarkRender measures formatting alone (no gathering, no collectors):
// 8 partitions plus 2 hot ones, 10 queue groups, 10 top devices, two
// bridges and the fixture device samples, into a reused buffer, Go runtime
// metrics and scrape counters included.
func BenchmarkRender(b *testing.B) {
	s := richSnapshot(b, 10, 10)
	x := NewExposition()
	var buf bytes.Buffer
	x.Write(&buf, s)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		x.Write(&buf, s)
	}
}

// BenchmarkRenderCluster is the cluster fixture (3 groups, 2 peers up, one
// down) with and without its cluster part, and the cluster part at its
// limits (64 peers up, 64 down, 64 groups with members on all 65 nodes).
func BenchmarkRenderCluster(b *testing.B) {
	s := clusterSnapshot(b, 10)
	standalone := *s
	standalone.Cluster = nil
	for _, c := range []struct {
		name string
		s    *Snapshot
	}{{"fixture", s}, {"fixture-without-cluster", &standalone}, {"limits", clusterLimits(64, 64)}} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			Render(&buf, c.s)
			b.SetBytes(int64(buf.Len()))
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				Render(&buf, c.s)
			}
		})
	}
}
