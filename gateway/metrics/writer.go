package metrics

import (
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"edgeq/internal/hist"
)

// Type is a family's type as the text format names it.
type Type string

// The metric types edgeq writes.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Help is the HELP text of a component's families, by family name: the one
// place to describe them, next to the code that writes them. A family
// written without an entry gets an empty HELP, which promtool and the
// component's tests refuse.
type Help map[string]string

// Writer writes families in the text format: HELP and TYPE once, then one
// line per series, and histograms from a hist.Snapshot. It writes many
// small pieces: give it a buffer, not a network connection.
//
// A collector takes the Writer of a scrape and calls With(its help table)
// to write its families; every Writer of one scrape shares the output, the
// scrape's time and its Shared values.
type Writer struct {
	*scrape
	help Help
}

// scrape is what the Writers of one scrape share.
type scrape struct {
	w      io.Writer
	line   []byte // reused for each line
	now    time.Time
	shared map[any]any // Shared values read in this scrape
}

// NewWriter returns a Writer of one scrape at now onto w.
func NewWriter(w io.Writer, now time.Time) *Writer {
	return &Writer{scrape: &scrape{w: w, line: make([]byte, 0, 256), now: now}}
}

// With is w writing families whose HELP texts are in h.
func (w *Writer) With(h Help) Writer { return Writer{scrape: w.scrape, help: h} }

// Time is when the scrape started: the moment ages are measured at.
func (w *Writer) Time() time.Time { return w.now }

// Family starts a family: HELP with its text from the help table, and TYPE.
func (w *Writer) Family(name string, typ Type) { w.Meta(name, w.help[name], string(typ)) }

// Meta writes a family's HELP and TYPE lines with the text given.
func (w *Writer) Meta(name, text, typ string) {
	w.line = appendMeta(w.line[:0], name, text, typ)
	_, _ = w.w.Write(w.line)
}

// Counter, Gauge and GaugeFloat write a family with a single unlabelled
// series.
func (w *Writer) Counter(name string, v uint64) { w.Family(name, Counter); w.Uint(name, v) }
func (w *Writer) Gauge(name string, v uint64)   { w.Family(name, Gauge); w.Uint(name, v) }
func (w *Writer) GaugeFloat(name string, v float64) {
	w.Family(name, Gauge)
	w.Float(name, v)
}

// Uint writes one series of the current family; labels are name/value
// pairs.
func (w *Writer) Uint(name string, v uint64, labels ...string) {
	w.line = appendSeries(w.line[:0], name, labels)
	w.line = append(w.line, ' ')
	w.line = strconv.AppendUint(w.line, v, 10)
	w.write()
}

// Float writes one float series of the current family.
func (w *Writer) Float(name string, v float64, labels ...string) {
	w.line = appendSeries(w.line[:0], name, labels)
	w.line = append(w.line, ' ')
	w.line = appendFloat(w.line, v)
	w.write()
}

// FloatLabels writes one float series of the current family with its
// labels as name/value structs (a library's samples: the device metrics).
func FloatLabels[L ~pair](w *Writer, name string, v float64, labels []L) {
	w.line = append(w.line[:0], name...)
	if len(labels) > 0 {
		w.line = append(w.line, '{')
		for i, l := range labels {
			if i > 0 {
				w.line = append(w.line, ',')
			}
			w.line = appendLabel(w.line, pair(l).Name, pair(l).Value)
		}
		w.line = append(w.line, '}')
	}
	w.line = append(w.line, ' ')
	w.line = appendFloat(w.line, v)
	w.write()
}

// pair is a label as a struct.
type pair = struct{ Name, Value string }

func (w *Writer) write() {
	w.line = append(w.line, '\n')
	_, _ = w.w.Write(w.line)
}

// Hist writes one histogram series of the current family from a snapshot:
// cumulative name_bucket{...,le="<seconds>"} for every bound and +Inf, then
// name_sum (seconds) and name_count. The count is the sum of the bucket
// counts, so _count always equals the +Inf bucket even though the snapshot's
// counters are read one by one while observations go on.
func (w *Writer) Hist(name string, s hist.Snapshot, labels ...string) {
	bucket, le := name+"_bucket", make([]string, len(labels), len(labels)+2)
	copy(le, labels)
	le = append(le, "le", "")
	var cum uint64
	for i, b := range s.Bounds {
		if i < len(s.Counts) {
			cum += s.Counts[i]
		}
		le[len(le)-1] = strconv.FormatFloat(b.Seconds(), 'g', -1, 64)
		w.Uint(bucket, cum, le...)
	}
	for i := len(s.Bounds); i < len(s.Counts); i++ {
		cum += s.Counts[i]
	}
	le[len(le)-1] = "+Inf"
	w.Uint(bucket, cum, le...)
	w.Float(name+"_sum", seconds(s.Sum), labels...)
	w.Uint(name+"_count", cum, labels...)
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

// Bool is a flag as a gauge's value: 1 or 0.
func Bool(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// BoolLabel is a flag as a label value: "true" or "false".
func BoolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// UnixSeconds is t as Unix time in seconds.
func UnixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// SortedKeys returns a map's keys in order, for a stable series order.
func SortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ReasonCount is one labelled count: closed connections by reason, error
// frames by code.
type ReasonCount struct {
	Reason string
	N      uint64
}
