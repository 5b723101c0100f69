package hot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// TestTopMatchesSorting: the bounded heap gives exactly the sorted answer, ties
// (equal rates, broken by device ID) and n beyond the device count included.
func TestTopMatchesSorting(t *testing.T) {
	tests := []struct {
		name    string
		devices int
		rates   int // distinct rate values: few means many ties
		n       []int
	}{
		{"empty", 0, 1, []int{0, 1, 10}},
		{"one", 1, 1, []int{0, 1, 10}},
		{"all tied", 50, 1, []int{1, 10, 49, 50, 51}},
		{"many ties", 500, 7, []int{1, 3, 10, 100}},
		{"distinct", 2000, 1 << 30, []int{1, 10, 64, 2000, 5000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			det := detectorWithRates(t, tt.devices, tt.rates, rand.New(rand.NewPCG(1, uint64(tt.devices))))
			for _, n := range tt.n {
				want := topBySorting(det, n)
				if n == 0 {
					want = nil
				}
				if got := det.Top(n); !slices.Equal(got, want) {
					t.Errorf("Top(%d) = %v\nwant (by sorting) %v", n, got, want)
				}
			}
		})
	}
}

// detectorWithRates tracks devices with random rates (some of them hot) as
// Evaluate would have left them.
func detectorWithRates(t testing.TB, devices, distinct int, rng *rand.Rand) *Detector {
	det, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range devices {
		dv := det.track(fmt.Sprintf("dev-%05d", i), i%8)
		dv.rate = float64(rng.IntN(distinct))
		dv.hot = rng.IntN(50) == 0
	}
	return det
}

// BenchmarkTop measures how long a scrape holds the detector (and so the
// ingest path's lock) with 10,000 tracked devices, against Top and against
// the Evaluate the node runs under the same lock every second.
func BenchmarkTop(b *testing.B) {
	det := detectorWithRates(b, 10_000, 1<<30, rand.New(rand.NewPCG(1, 2)))
	b.Run("heap10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			det.Top(10)
		}
	})
	b.Run("sort10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			topBySorting(det, 10)
		}
	})
	b.Run("Evaluate", func(b *testing.B) {
		now := time.Unix(1000, 0)
		for i := range 10_000 {
			det.Observe(fmt.Sprintf("dev-%05d", i), i%8, now)
		}
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond) // stays inside the window: devices are kept
			det.Evaluate(now)
		}
	})
}

// topBySorting is the obvious implementation: sort every tracked device.
func topBySorting(d *Detector, n int) []DeviceRate {
	out := make([]DeviceRate, 0, len(d.devices))
	for id, dv := range d.devices {
		out = append(out, DeviceRate{Device: id, Rate: dv.rate, Hot: dv.hot})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rate != out[j].Rate {
			return out[i].Rate > out[j].Rate
		}
		return out[i].Device < out[j].Device
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
