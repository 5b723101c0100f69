package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRegistryOrderAndShared: the collectors write in the order given, each
// with its own help table; a Shared value is read once per scrape however
// many collectors ask, and again in the next scrape.
func TestRegistryOrderAndShared(t *testing.T) {
	reads := 0
	shared := NewShared(func() int { reads++; return reads })
	collector := func(name string, h Help) Collector {
		return CollectorFunc(func(w *Writer) {
			e := w.With(h)
			e.Gauge(name, uint64(shared.Get(w)))
		})
	}
	r := NewRegistry(
		collector("b_first", Help{"b_first": "Written first."}),
		collector("a_second", Help{"a_second": "Written second."}),
	)
	r.GoRuntime = false
	for scrape := 1; scrape <= 2; scrape++ {
		var b bytes.Buffer
		r.Write(&b, time.Unix(1_700_000_000, 0))
		page := b.String()
		first, second := strings.Index(page, "# HELP b_first Written first.\n"), strings.Index(page, "# HELP a_second Written second.\n")
		if first < 0 || second < first {
			t.Fatalf("scrape %d: collectors out of order or without help:\n%s", scrape, page)
		}
		for _, want := range []string{"\nb_first ", "\na_second "} {
			if !strings.Contains(page, want+string(rune('0'+scrape))+"\n") {
				t.Errorf("scrape %d: %s not the value read for this scrape:\n%s", scrape, want, page)
			}
		}
		if reads != scrape {
			t.Errorf("scrape %d: shared value read %d times in all, want %d", scrape, reads, scrape)
		}
	}
}

// TestWriterWithoutHelp: a family the collector's table lacks gets an empty
// HELP (which lint and promtool refuse), never another table's text.
func TestWriterWithoutHelp(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, time.Time{})
	e := w.With(Help{"x": "X."})
	e.Counter("x", 1)
	other := w.With(Help{})
	other.Counter("y", 2)
	if got, want := b.String(), "# HELP x X.\n# TYPE x counter\nx 1\n# HELP y\n# TYPE y counter\ny 2\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
