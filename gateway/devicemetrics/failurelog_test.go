package devicemetrics

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFailureLog: a failing collector is logged when it starts failing,
// when its error changes and once per Every otherwise, and once when it
// recovers; the scrape's samples never depend on the log.
func TestFailureLog(t *testing.T) {
	var out bytes.Buffer
	f := &FailureLog{Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})), Every: 10 * time.Minute}
	t0 := time.Unix(1_700_000_000, 0)
	ok := fakeCollector{name: "cpu", n: 1}
	gone := fakeCollector{name: "thermal", err: errors.New("no zone")}
	moved := fakeCollector{name: "thermal", err: errors.New("zone moved")}
	steps := []struct {
		cs   []Collector
		at   time.Duration
		want string // the lines logged, in order; "" for none
	}{
		{[]Collector{ok, gone}, 0, `level=WARN msg="device metrics collector failed" collector=thermal err="no zone"`},
		{[]Collector{ok, gone}, time.Minute, ""},
		{[]Collector{ok, moved}, 2 * time.Minute, `level=WARN msg="device metrics collector failed" collector=thermal err="zone moved"`},
		{[]Collector{ok, moved}, 11 * time.Minute, ""},
		{[]Collector{ok, moved}, 12 * time.Minute, `level=WARN msg="device metrics collector failed" collector=thermal err="zone moved"`},
		{[]Collector{ok, fakeCollector{name: "thermal", n: 1}}, 13 * time.Minute, `level=INFO msg="device metrics collector recovered" collector=thermal`},
		{[]Collector{ok, fakeCollector{name: "thermal", n: 1}}, 14 * time.Minute, ""},
	}
	for i, s := range steps {
		out.Reset()
		samples := f.CollectAll(s.cs, t0.Add(s.at))
		if got := strings.TrimSpace(out.String()); got != s.want {
			t.Errorf("step %d: logged %q, want %q", i, got, s.want)
		}
		want := 0
		for _, c := range s.cs {
			if c.(fakeCollector).err == nil {
				want++
			}
		}
		var success int
		for _, x := range samples {
			if x.Name == "edgeq_collector_success" && x.Value == 1 {
				success++
			}
		}
		if success != want {
			t.Errorf("step %d: %d collectors succeeded, want %d", i, success, want)
		}
	}
}
