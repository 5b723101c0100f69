package devicemetrics

import (
	"slices"

	"edgeq/gateway/metrics"
)

// WriteMetrics writes device samples (CollectAll), one family per metric
// name with the samples' own HELP text and TYPE. CollectAll keeps the
// samples of one name together; should a name come back later anyway, its
// samples are moved up to its first run rather than written as a second
// family.
func WriteMetrics(w *metrics.Writer, samples []Sample) {
	if !contiguous(samples) {
		samples = groupByName(samples)
	}
	prev := ""
	for i, s := range samples {
		if i == 0 || s.Name != prev {
			w.Meta(s.Name, s.Help, s.Type.String())
			prev = s.Name
		}
		metrics.FloatLabels(w, s.Name, s.Value, s.Labels)
	}
}

func contiguous(samples []Sample) bool {
	seen := map[string]bool{}
	for i, s := range samples {
		if i > 0 && samples[i-1].Name == s.Name {
			continue
		}
		if seen[s.Name] {
			return false
		}
		seen[s.Name] = true
	}
	return true
}

// groupByName orders samples by the first appearance of their name, keeping
// the order within a name.
func groupByName(samples []Sample) []Sample {
	first := map[string]int{}
	for i, s := range samples {
		if _, ok := first[s.Name]; !ok {
			first[s.Name] = i
		}
	}
	out := slices.Clone(samples)
	slices.SortStableFunc(out, func(a, b Sample) int { return first[a.Name] - first[b.Name] })
	return out
}

// MetricsCollector writes the device samples of the scrape that samples reads
// (shared with the device health of /v1/status).
func MetricsCollector(samples func(*metrics.Writer) []Sample) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) { WriteMetrics(w, samples(w)) })
}
