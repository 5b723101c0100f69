package metrics

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"edgeq/gateway/metrics/lint"
)

// fullPage renders everything a node can show: a standalone node with
// partitions, groups, bridges and the fixture device metrics, a cluster
// node, and the exposition's own families (Go runtime, scrapes).
func fullPage(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	x := NewExposition()
	x.Observe(0)
	x.Write(&b, richSnapshot(t, 10, 3))
	// The cluster node's page without the families the first one had.
	var c bytes.Buffer
	Render(&c, clusterSnapshot(t, 4))
	seen := map[string]bool{}
	for _, f := range helpLines(b.Bytes()) {
		seen[f.name] = true
	}
	keep := false
	for _, line := range strings.SplitAfter(c.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
			keep = !seen[name]
		}
		if keep {
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

type helpLine struct{ name, text string }

func helpLines(text []byte) []helpLine {
	var out []helpLine
	for _, line := range strings.Split(string(text), "\n") {
		rest, ok := strings.CutPrefix(line, "# HELP ")
		if !ok {
			continue
		}
		name, txt, _ := strings.Cut(rest, " ")
		out = append(out, helpLine{name, strings.TrimSpace(txt)})
	}
	return out
}

// TestEveryFamilyHasHelp: every family on a full page has HELP text, and
// every entry of the help table is used. A family added without help fails
// here, naming it and where its text goes.
func TestEveryFamilyHasHelp(t *testing.T) {
	page := fullPage(t)
	device := map[string]bool{}
	for _, s := range fixtureSamples(t) {
		device[s.Name] = true
	}
	used := map[string]bool{}
	lines := helpLines(page)
	if len(lines) < 150 {
		t.Fatalf("only %d families on the full page; the fixtures lost some", len(lines))
	}
	for _, l := range lines {
		used[l.name] = true
		if l.text != "" {
			continue
		}
		if device[l.name] {
			t.Errorf("device metric family %s has no HELP text: set Help on its devicemetrics.Sample (a ...Help constant next to its name in gateway/devicemetrics)", l.name)
		} else {
			t.Errorf("metric family %s has no HELP text: add %q: \"<what it counts>\" to the help table in gateway/metrics/help.go", l.name, l.name)
		}
	}
	var stale []string
	for name := range help {
		if !used[name] {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		t.Errorf("help table entry %s (gateway/metrics/help.go) is on no rendered page: remove it, or render the family in fullPage's snapshots", name)
	}
	mustLint(t, page)
}

// TestPromtool: the full page, cluster families included, passes
// `promtool check metrics` without a finding.
func TestPromtool(t *testing.T) {
	lint.Promtool(t, fullPage(t))
}

// TestHelpEscaped: HELP text escapes the backslash and the line feed, as
// the text format asks.
func TestHelpEscaped(t *testing.T) {
	got := string(appendMeta(nil, "x", "a\\b\nc", gauge))
	if want := "# HELP x a\\\\b\\nc\n# TYPE x gauge\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := string(appendMeta(nil, "x", "", counter)), "# HELP x\n# TYPE x counter\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
