package devicemetrics

import (
	"math"
	"strconv"
	"strings"
)

// MetricType tells an exposition layer how a sample behaves over time.
type MetricType uint8

const (
	// Gauge is a value that can go up and down.
	Gauge MetricType = iota + 1
	// Counter only increases, except when its source restarts (reboot,
	// process restart, interface re-created).
	Counter
)

// String returns the Prometheus name of the type ("gauge", "counter").
func (t MetricType) String() string {
	switch t {
	case Gauge:
		return "gauge"
	case Counter:
		return "counter"
	default:
		return "untyped"
	}
}

// Label is one name/value pair of a sample.
type Label struct {
	Name, Value string
}

// Sample is one metric value. Samples of the same Name share Help and Type.
// Name follows Prometheus conventions, e.g. edgeq_device_cpu_seconds_total;
// units are base units (seconds, bytes, degrees Celsius).
type Sample struct {
	Name   string
	Help   string
	Type   MetricType
	Labels []Label
	Value  float64
}

// String renders the sample as `name{label="value",...} value`, for logs and
// golden files. Label values are Go-quoted; this is not the exposition
// format, whose escaping is the exposing layer's job.
func (s Sample) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	if len(s.Labels) > 0 {
		b.WriteByte('{')
		for i, l := range s.Labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.Name)
			b.WriteByte('=')
			b.WriteString(strconv.Quote(l.Value))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatValue(s.Value))
	return b.String()
}

// formatValue writes byte and page counts as plain integers (3977408512, not
// 3.977408512e+09) and everything else in the shortest exact form.
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Label returns the value of the named label and whether it is present.
func (s Sample) Label(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

func gauge(name, help string, value float64, labels ...Label) Sample {
	return Sample{Name: name, Help: help, Type: Gauge, Labels: labels, Value: value}
}

func counter(name, help string, value float64, labels ...Label) Sample {
	return Sample{Name: name, Help: help, Type: Counter, Labels: labels, Value: value}
}
