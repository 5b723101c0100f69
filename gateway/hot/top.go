package hot

import (
	"container/heap"
	"slices"
)

// Top returns up to n devices by rate as of the last Evaluate, highest first,
// ties by device ID. A bounded min-heap keeps it O(devices × log n) time and
// O(n) space: the node calls it under the lock that ingest takes for Observe
// (metrics and status scrapes), so its cost is the time ingest may wait.
func (d *Detector) Top(n int) []DeviceRate {
	if n <= 0 {
		return nil
	}
	h := make(rateHeap, 0, min(n, len(d.devices)))
	for id, dv := range d.devices {
		r := DeviceRate{Device: id, Rate: dv.rate, Hot: dv.hot}
		switch {
		case len(h) < n:
			heap.Push(&h, r)
		case before(r, h[0]):
			h[0] = r
			heap.Fix(&h, 0)
		}
	}
	out := []DeviceRate(h)
	slices.SortFunc(out, func(a, b DeviceRate) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	return out
}

// before reports whether a ranks above b in Top's order.
func before(a, b DeviceRate) bool {
	if a.Rate != b.Rate {
		return a.Rate > b.Rate
	}
	return a.Device < b.Device
}

// rateHeap is a min-heap by rank: its root is the lowest-ranked of the kept
// devices, the one a better device replaces.
type rateHeap []DeviceRate

func (h rateHeap) Len() int           { return len(h) }
func (h rateHeap) Less(i, j int) bool { return before(h[j], h[i]) }
func (h rateHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rateHeap) Push(x any)        { *h = append(*h, x.(DeviceRate)) }
func (h *rateHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
