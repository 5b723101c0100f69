package devicemetrics

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Collector reads one group of device metrics.
//
// Collect appends its samples to dst and returns the extended slice. On error
// the returned slice is ignored: CollectAll keeps none of a failed collector's
// samples, so a half-read collector never shows partial data. Collectors in
// this package hold only immutable configuration and are safe for concurrent
// use.
type Collector interface {
	// Name is the value of the collector label, e.g. "cpu".
	Name() string
	Collect(dst []Sample) ([]Sample, error)
}

// ErrCollectorPanic marks the error reported for a collector that panicked.
var ErrCollectorPanic = errors.New("collector panicked")

const (
	successName = "edgeq_collector_success"
	successHelp = "Whether the device metrics collector succeeded in this scrape (1) or failed (0)."
)

// CollectAll runs every collector in order, appends their samples to dst
// and then one edgeq_collector_success{collector=Name()} 1 or 0 per
// collector, in the same order. It never fails: a collector that returns an
// error or panics contributes no samples and a success of 0. Nil collectors
// are skipped.
//
// Samples of one name are contiguous in the output (each collector emits its
// names in runs and no two collectors share a name), so an exposition layer
// can write HELP and TYPE once per run.
func CollectAll(cs []Collector, dst []Sample) []Sample {
	return CollectAllWithErrors(cs, dst, nil)
}

// CollectAllWithErrors is CollectAll that also reports why a collector
// failed, so the caller can log it (rate-limited: a broken sensor fails on
// every scrape). onError may be nil.
func CollectAllWithErrors(cs []Collector, dst []Sample, onError func(collector string, err error)) []Sample {
	succeeded := make([]bool, len(cs))
	for i, c := range cs {
		if c == nil {
			continue
		}
		start := len(dst)
		out, err := collectRecovering(c, dst)
		if err == nil && len(out) < start {
			err = fmt.Errorf("collector %q returned %d samples, fewer than the %d it was given", c.Name(), len(out), start)
		}
		if err != nil {
			// dst still has length start: the failed collector's samples are dropped.
			if onError != nil {
				onError(c.Name(), err)
			}
			continue
		}
		succeeded[i] = true
		dst = out
	}
	for i, c := range cs {
		if c != nil {
			dst = append(dst, gauge(successName, successHelp, boolValue(succeeded[i]), Label{"collector", c.Name()}))
		}
	}
	return dst
}

// collectRecovering calls c.Collect and turns a panic into an error, so one
// broken reader (or a library bug on a malformed file) cannot take down a
// scrape or the broker.
func collectRecovering(c Collector, dst []Sample) (out []Sample, err error) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			err = fmt.Errorf("%w: %v\n%s", ErrCollectorPanic, r, debug.Stack())
		}
	}()
	return c.Collect(dst)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
