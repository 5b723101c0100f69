package lint

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Values parses an exposition and returns every sample by its Key. A
// histogram gives its name_bucket series (with an le label: "0.005",
// "+Inf"), name_sum and name_count; a summary its quantiles, _sum and
// _count.
func Values(text []byte) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName(), lp.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				out[Key(name, labels...)] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[Key(name, labels...)] = m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				out[Key(name, labels...)] = m.GetUntyped().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					out[Key(name+"_bucket", append(slices.Clone(labels), "le", formatBound(b.GetUpperBound()))...)] = float64(b.GetCumulativeCount())
				}
				out[Key(name+"_sum", labels...)] = h.GetSampleSum()
				out[Key(name+"_count", labels...)] = float64(h.GetSampleCount())
			case m.GetSummary() != nil:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					out[Key(name, append(slices.Clone(labels), "quantile", formatBound(q.GetQuantile()))...)] = q.GetValue()
				}
				out[Key(name+"_sum", labels...)] = s.GetSampleSum()
				out[Key(name+"_count", labels...)] = float64(s.GetSampleCount())
			}
		}
	}
	return out, nil
}

// Key names one series: name{a="1",b="2"} with the labels (name/value
// pairs) sorted by name, values Go-quoted; just name without labels.
func Key(name string, labels ...string) string {
	if len(labels) < 2 {
		return name
	}
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, labels[i]+"="+strconv.Quote(labels[i+1]))
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func formatBound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
