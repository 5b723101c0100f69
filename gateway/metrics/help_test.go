package metrics_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/cluster"
	"edgeq/gateway/console"
	"edgeq/gateway/groups"
	"edgeq/gateway/ingeststats"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/metrics"
	"edgeq/gateway/metrics/lint"
	"edgeq/gateway/natsserver"
	"edgeq/gateway/nsqserver"
	"edgeq/wal"
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
			t.Errorf("metric family %s has no HELP text: add %q: \"<what it counts>\" to the MetricsHelp table of the package that writes it", l.name, l.name)
		}
	}
	var stale []string
	owner := map[string]string{}
	for table, h := range helpTables {
		for name := range h {
			if other, ok := owner[name]; ok {
				t.Errorf("family %s has help in two tables, %s and %s: one component owns it", name, other, table)
			}
			owner[name] = table
			if !used[name] {
				stale = append(stale, name)
			}
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		t.Errorf("help table entry %s (%s) is on no rendered page: remove it, or render the family in fullPage's snapshots", name, owner[name])
	}
	mustLint(t, page)
}

// helpTables are every component's help table, by where it is.
var helpTables = map[string]metrics.Help{
	"gateway/metrics/help.go":       metrics.OwnHelp,
	"gateway/ingeststats":           ingeststats.MetricsHelp,
	"wal/collect.go":                wal.MetricsHelp,
	"gateway/groups/collect.go":     groups.MetricsHelp,
	"gateway/cluster/collect.go":    cluster.MetricsHelp,
	"gateway/natsserver/collect.go": natsserver.MetricsHelp,
	"gateway/console/collect.go":    console.MetricsHelp,
	"gateway/nsqserver/collect.go":  nsqserver.MetricsHelp,
	"gateway/jsapi/collect.go":      jsapi.MetricsHelp,
	"bridge/mqtt/collect.go":        mqtt.MetricsHelp,
	"bridge/serial/collect.go":      serial.MetricsHelp,
	"bridge/modbus/collect.go":      modbus.MetricsHelp,
	"bridge/uplink/collect.go":      uplink.MetricsHelp,
}

// TestPromtool: the full page, cluster families included, passes
// `promtool check metrics` without a finding.
func TestPromtool(t *testing.T) {
	lint.Promtool(t, fullPage(t))
}
