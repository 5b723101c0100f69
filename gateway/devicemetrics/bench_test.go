package devicemetrics

import "testing"

// BenchmarkCollectAll measures one scrape of every collector on the
// fixtures, reusing the sample slice as a caller would.
func BenchmarkCollectAll(b *testing.B) {
	cs := newCollectors(fixtureConfig(), fixtureSystem())
	dst := CollectAll(cs, nil)
	want := len(dst)
	b.ReportAllocs()
	for b.Loop() {
		dst = CollectAll(cs, dst[:0])
	}
	if s := success(dst); len(dst) != want || len(s) != len(cs) {
		b.Fatalf("got %d samples, want %d", len(dst), want)
	}
	for c, v := range success(dst) {
		if v != 1 {
			b.Fatalf("collector %s failed on the fixture", c)
		}
	}
}
