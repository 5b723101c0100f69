// Package lint checks a Prometheus text exposition the way a scraper and a
// careful reviewer would: it must parse with the reference parser
// (prometheus/common/expfmt, legacy metric and label names), and it must
// pass the checks that parser leaves out. Tests of edgeq's /metrics use it;
// the edgeq binary does not.
package lint

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Report is the outcome of Check.
type Report struct {
	Families int      // metric families
	Series   int      // series; a histogram or summary counts once per label set
	Problems []string // empty when the exposition is clean
}

// Err returns the problems as one error, or nil.
func (r Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("%d exposition problems:\n  %s", len(r.Problems), strings.Join(r.Problems, "\n  "))
}

// Policy adds naming rules for the families of one prefix.
type Policy struct {
	// Prefix selects the families the rules apply to ("edgeq_"); empty: none.
	Prefix string
}

// Check lints text:
//
//   - it parses with expfmt's text parser under legacy name validation;
//   - every family has exactly one HELP and one TYPE line, both before its
//     first sample, and its samples form one block (not split by another
//     family);
//   - no series appears twice (same name and label set) and no label name
//     starts with "__" (the parser refuses a label name twice in a series);
//   - histograms: bucket bounds strictly ascending and ending in +Inf,
//     cumulative counts never decreasing, _count equal to the +Inf bucket,
//     a _sum present;
//   - no family takes a name another family's series use (X next to a
//     counter X_total, or H_bucket, H_sum, H_count next to a histogram H);
//   - with a Policy prefix, counters end in _total and other types do not.
func Check(text []byte, pol Policy) Report {
	var r Report
	problem := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	types := checkLines(text, problem)

	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		problem("expfmt: %v", err)
		return r
	}
	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	slices.Sort(names)
	r.Families = len(names)
	for _, name := range names {
		mf := fams[name]
		typ := strings.ToLower(mf.GetType().String())
		if t, ok := types[name]; ok && t != typ {
			problem("%s: TYPE %s, parsed as %s", name, t, typ)
		}
		if pol.Prefix != "" && strings.HasPrefix(name, pol.Prefix) {
			if total := strings.HasSuffix(name, "_total"); (typ == "counter") != total {
				problem("%s: a %s; by convention only counters end in _total, and every counter does", name, typ)
			}
		}
		switch typ {
		case "counter":
			if base, ok := strings.CutSuffix(name, "_total"); ok && fams[base] != nil {
				problem("%s: family %s takes the name of counter %s without its _total", base, base, name)
			}
		case "histogram", "summary":
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if fams[name+suffix] != nil {
					problem("%s%s: family named like a series of %s %s", name, suffix, typ, name)
				}
			}
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			r.Series++
			var pairs []string
			for _, lp := range m.GetLabel() {
				ln := lp.GetName()
				if strings.HasPrefix(ln, "__") {
					problem("%s: label name %q is reserved (starts with __)", name, ln)
				}
				pairs = append(pairs, ln, lp.GetValue())
			}
			key := Key(name, pairs...)
			if seen[key] {
				problem("duplicate series %s", key)
			}
			seen[key] = true
			if h := m.GetHistogram(); typ == "histogram" && h != nil {
				if h.SampleSum == nil {
					problem("%s: histogram without _sum", key)
				}
				prev, prevCount := math.Inf(-1), uint64(0)
				buckets := h.GetBucket()
				for i, b := range buckets {
					ub := b.GetUpperBound()
					if !(ub > prev) {
						problem("%s: bucket le=%g after le=%g: bounds must be strictly ascending", key, ub, prev)
					}
					if c := b.GetCumulativeCount(); i > 0 && c < prevCount {
						problem("%s: bucket le=%g count %d below the previous %d: counts must be cumulative", key, ub, c, prevCount)
					}
					prev, prevCount = ub, b.GetCumulativeCount()
				}
				switch {
				case len(buckets) == 0 || !math.IsInf(prev, 1):
					problem("%s: buckets do not end in le=\"+Inf\"", key)
				case h.GetSampleCount() != prevCount:
					problem("%s: _count %d but the +Inf bucket holds %d", key, h.GetSampleCount(), prevCount)
				}
			}
		}
	}
	return r
}

// checkLines checks metadata and family blocks line by line, and returns
// each family's TYPE.
func checkLines(text []byte, problem func(string, ...any)) map[string]string {
	type family struct {
		help, typ, samples, closed bool
	}
	fams := map[string]*family{}
	types := map[string]string{}
	cur := ""
	enter := func(name string, line int) *family {
		f := fams[name]
		if f == nil {
			f = &family{}
			fams[name] = f
		}
		if name != cur {
			if f.closed || f.samples {
				problem("line %d: family %s continues after another family: its lines must form one block", line, name)
			}
			if c := fams[cur]; c != nil {
				c.closed = true
			}
			cur = name
		}
		return f
	}
	for i, raw := range bytes.Split(text, []byte("\n")) {
		line, n := string(raw), i+1
		switch {
		case line == "":
		case strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE "):
			fields := strings.Fields(line)
			if len(fields) < 3 {
				problem("line %d: %q names no metric", n, line)
				continue
			}
			f := enter(fields[2], n)
			if f.samples {
				problem("line %d: %s %s after its samples", n, fields[1], fields[2])
			}
			if fields[1] == "HELP" {
				if f.help {
					problem("line %d: second HELP for %s", n, fields[2])
				}
				f.help = true
				continue
			}
			if f.typ {
				problem("line %d: second TYPE for %s", n, fields[2])
			}
			f.typ = true
			if len(fields) > 3 {
				types[fields[2]] = fields[3]
			}
		case strings.HasPrefix(line, "#"):
		default:
			name := line
			if j := strings.IndexAny(line, "{ \t"); j >= 0 {
				name = line[:j]
			}
			fam := familyOf(name, cur, types[cur])
			if fam != cur {
				problem("line %d: sample %s outside the block of its family (no HELP and TYPE before it, or split)", n, name)
				continue
			}
			fams[cur].samples = true
		}
	}
	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := fams[name]
		if !f.help {
			problem("%s: no HELP line", name)
		}
		if !f.typ {
			problem("%s: no TYPE line", name)
		}
	}
	return types
}

// familyOf maps a sample name to the current family when it is one of its
// series names, and returns it unchanged otherwise.
func familyOf(sample, cur, typ string) string {
	if sample == cur {
		return cur
	}
	var suffixes []string
	switch typ {
	case "histogram":
		suffixes = []string{"_bucket", "_sum", "_count"}
	case "summary":
		suffixes = []string{"_sum", "_count"}
	}
	for _, s := range suffixes {
		if sample == cur+s {
			return cur
		}
	}
	return sample
}
