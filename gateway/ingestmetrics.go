package gateway

import (
	"sort"

	"edgeq/gateway/hot"
	"edgeq/gateway/ingeststats"
	"edgeq/gateway/metrics"
	"edgeq/wal"
)

// collector is the ingest's metrics collector: its sources, the log's
// refusals of the scrape (log) with the NATS server's (natsBadDevice), hot
// isolation and the top (a function: a setting) busiest devices.
func (in *Ingest) collector(top func() int, log func(*metrics.Writer) wal.Stats, natsBadDevice func() uint64) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		s := ingeststats.Scrape{Sources: in.sourceStats(), LogRejected: log(w).Rejected, NATSBadDevice: natsBadDevice()}
		s.TopDevices, s.Hot = in.hotView(top())
		ingeststats.WriteMetrics(w, &s)
	})
}

// sourceStats are the sources' counters, sorted by name.
func (in *Ingest) sourceStats() []ingeststats.Source {
	srcs := in.Sources()
	out := make([]ingeststats.Source, 0, len(srcs))
	for name, c := range srcs {
		out = append(out, ingeststats.Source{Name: name, Msgs: c[0], Bytes: c[1], Errors: c[2]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hotView returns the n busiest devices and the detector's counters, holding
// the detector's lock (which Observe takes on every append) for one walk
// over the tracked devices: Top keeps a heap of n instead of sorting them
// all, so the wait it can cause ingest is bounded by that walk.
func (in *Ingest) hotView(n int) ([]hot.DeviceRate, ingeststats.HotStats) {
	hs := ingeststats.HotStats{Moves: in.moves.Load(), MoveErrors: in.moveErrors.Load()}
	if in.hot == nil {
		return nil, hs
	}
	in.hotMu.Lock()
	top := in.hot.Top(n)
	st := in.hot.Stats()
	in.hotMu.Unlock()
	hs.Enabled, hs.Tracked, hs.Isolated, hs.Untracked, hs.HeldBack = true, st.Tracked, st.Hot, st.Untracked, st.HeldBack
	return top, hs
}
