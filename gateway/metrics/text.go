package metrics

import (
	"io"
	"math"
	"strconv"
	"time"

	"edgeq/gateway/devicemetrics"
	"edgeq/internal/hist"
)

// Metric types as the text format names them.
const (
	counter   = "counter"
	gauge     = "gauge"
	histogram = "histogram"
)

// enc writes families: their HELP (from the help table) and TYPE lines, then
// one line per series, and histograms from a hist.Snapshot.
type enc struct {
	w    io.Writer
	line []byte // reused for each line
}

// family starts a family: HELP with its text from the help table, and TYPE.
func (e *enc) family(name, typ string) { e.meta(name, help[name], typ) }

// meta writes a family's HELP and TYPE lines.
func (e *enc) meta(name, text, typ string) {
	e.line = appendMeta(e.line[:0], name, text, typ)
	_, _ = e.w.Write(e.line)
}

// counter1, gauge1 and gaugeF1 write a family with a single unlabelled series.
func (e *enc) counter1(name string, v uint64) { e.family(name, counter); e.u(name, v) }
func (e *enc) gauge1(name string, v uint64)   { e.family(name, gauge); e.u(name, v) }
func (e *enc) gaugeF1(name string, v float64) { e.family(name, gauge); e.f(name, v) }

// u writes one series of the current family; labels are name/value pairs.
func (e *enc) u(name string, v uint64, labels ...string) {
	e.line = appendSeries(e.line[:0], name, labels)
	e.line = append(e.line, ' ')
	e.line = strconv.AppendUint(e.line, v, 10)
	e.write()
}

// f writes one float series of the current family.
func (e *enc) f(name string, v float64, labels ...string) {
	e.line = appendSeries(e.line[:0], name, labels)
	e.line = append(e.line, ' ')
	e.line = appendFloat(e.line, v)
	e.write()
}

// sample writes one device sample of the current family.
func (e *enc) sample(s devicemetrics.Sample) {
	e.line = append(e.line[:0], s.Name...)
	if len(s.Labels) > 0 {
		e.line = append(e.line, '{')
		for i, l := range s.Labels {
			if i > 0 {
				e.line = append(e.line, ',')
			}
			e.line = appendLabel(e.line, l.Name, l.Value)
		}
		e.line = append(e.line, '}')
	}
	e.line = append(e.line, ' ')
	e.line = appendFloat(e.line, s.Value)
	e.write()
}

func (e *enc) write() {
	e.line = append(e.line, '\n')
	_, _ = e.w.Write(e.line)
}

// hist writes one histogram series of the current family from a snapshot:
// cumulative name_bucket{...,le="<seconds>"} for every bound and +Inf, then
// name_sum (seconds) and name_count. The count is the sum of the bucket
// counts, so _count always equals the +Inf bucket even though the snapshot's
// counters are read one by one while observations go on.
func (e *enc) hist(name string, s hist.Snapshot, labels ...string) {
	bucket, le := name+"_bucket", make([]string, len(labels), len(labels)+2)
	copy(le, labels)
	le = append(le, "le", "")
	var cum uint64
	for i, b := range s.Bounds {
		if i < len(s.Counts) {
			cum += s.Counts[i]
		}
		le[len(le)-1] = strconv.FormatFloat(b.Seconds(), 'g', -1, 64)
		e.u(bucket, cum, le...)
	}
	for i := len(s.Bounds); i < len(s.Counts); i++ {
		cum += s.Counts[i]
	}
	le[len(le)-1] = "+Inf"
	e.u(bucket, cum, le...)
	e.f(name+"_sum", seconds(s.Sum), labels...)
	e.u(name+"_count", cum, labels...)
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// appendSeries appends name{l1="v1",...}; labels are name/value pairs.
func appendSeries(dst []byte, name string, labels []string) []byte {
	dst = append(dst, name...)
	if len(labels) < 2 {
		return dst
	}
	dst = append(dst, '{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendLabel(dst, labels[i], labels[i+1])
	}
	return append(dst, '}')
}

// appendMeta appends "# HELP name text" and "# TYPE name typ" lines.
func appendMeta(dst []byte, name, text, typ string) []byte {
	dst = append(dst, "# HELP "...)
	dst = append(dst, name...)
	if text != "" {
		dst = appendEscaped(append(dst, ' '), text, false)
	}
	dst = append(dst, "\n# TYPE "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, typ...)
	return append(dst, '\n')
}

// appendLabel appends name="value".
func appendLabel(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, '=', '"')
	return append(appendEscaped(dst, value, true), '"')
}

// appendEscaped appends s with the text format's escapes: the backslash and
// the line feed in HELP text, and in a label value (quoted) also the double
// quote.
func appendEscaped(dst []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			dst = append(dst, '\\', '\\')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '"' && quoted:
			dst = append(dst, '\\', '"')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendFloat writes whole numbers plainly (3977408512, not 3.977408512e+09)
// and everything else in the shortest exact form; NaN and ±Inf as the text
// format spells them.
func appendFloat(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendFloat(dst, v, 'f', -1, 64)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

func boolValue(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
