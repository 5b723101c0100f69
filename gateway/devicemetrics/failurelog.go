package devicemetrics

import (
	"log/slog"
	"sync"
	"time"
)

// FailureLog runs collectors and logs their failures for people: a
// collector that fails is logged when it starts failing, when its error
// changes, and at most every Every otherwise (a missing sensor fails on
// every scrape), and once when it recovers. The failure itself shows as
// edgeq_collector_success 0 and never fails the scrape. Safe for
// concurrent scrapes.
type FailureLog struct {
	Logger *slog.Logger
	Every  time.Duration

	mu      sync.Mutex
	failing map[string]failure // bound: one per collector
}

type failure struct {
	msg    string
	logged time.Time
}

// CollectAll runs cs at now (CollectAllWithErrors) and logs what changed.
func (f *FailureLog) CollectAll(cs []Collector, now time.Time) []Sample {
	failed := map[string]bool{}
	samples := CollectAllWithErrors(cs, nil, func(c string, err error) {
		failed[c] = true
		msg := err.Error()
		f.mu.Lock()
		if f.failing == nil {
			f.failing = map[string]failure{}
		}
		prev, was := f.failing[c]
		logIt := !was || prev.msg != msg || now.Sub(prev.logged) >= f.Every
		if logIt {
			prev = failure{msg: msg, logged: now}
		}
		prev.msg = msg
		f.failing[c] = prev
		f.mu.Unlock()
		if logIt {
			f.Logger.Warn("device metrics collector failed", "collector", c, "err", msg)
		}
	})
	f.mu.Lock()
	for c := range f.failing {
		if !failed[c] {
			delete(f.failing, c)
			f.Logger.Info("device metrics collector recovered", "collector", c)
		}
	}
	f.mu.Unlock()
	return samples
}
