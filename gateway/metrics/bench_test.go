package metrics

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
