package devicemetrics

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

func allCollectorNames() []string {
	return []string{"cpu", "load", "memory", "uptime", "process", "thermal", "network", "filesystem", "disk"}
}

// TestMissingRootsFailEveryCollector points each collector, with the real
// statfs and stat, at roots and a data dir that do not exist: each one
// reports success 0 and nothing else, and nothing panics.
func TestMissingRootsFailEveryCollector(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cfg := Config{ProcRoot: missing, SysRoot: missing, DataDir: missing}.withDefaults()
	cs := newCollectors(cfg, realSystem())

	var failed []string
	got := CollectAllWithErrors(cs, nil, func(c string, err error) {
		failed = append(failed, c)
		if errors.Is(err, ErrCollectorPanic) {
			t.Errorf("%s panicked on a missing root: %v", c, err)
		}
	})
	if !slices.Equal(failed, allCollectorNames()) {
		t.Errorf("failed collectors = %v, want all of %v", failed, allCollectorNames())
	}
	if len(got) != len(cs) {
		t.Errorf("got %d samples, want only the %d success samples:\n%s", len(got), len(cs), render(got))
	}
	for c, v := range success(got) {
		if v != 0 {
			t.Errorf("collector %s success = %v, want 0", c, v)
		}
	}
}

// TestFailingCollectorsDoNotHideTheOthers interleaves collectors on a
// missing root with the same collectors on the fixture.
func TestFailingCollectorsDoNotHideTheOthers(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	good := newCollectors(fixtureConfig(), fixtureSystem())
	bad := newCollectors(Config{ProcRoot: missing, SysRoot: missing, DataDir: missing}.withDefaults(), realSystem())
	var mixed []Collector
	for i := range good {
		mixed = append(mixed, renamed{bad[i], "broken_" + bad[i].Name()}, good[i])
	}

	got := CollectAll(mixed, nil)
	want := CollectAll(good, nil)
	succ := success(got)
	for _, name := range allCollectorNames() {
		if succ[name] != 1 || succ["broken_"+name] != 0 {
			t.Errorf("%s: success %v, broken_%s: %v; want 1 and 0", name, succ[name], name, succ["broken_"+name])
		}
	}
	// Apart from the success samples, the output is the fixture's alone.
	strip := func(s []Sample) []Sample {
		return slices.DeleteFunc(slices.Clone(s), func(x Sample) bool { return x.Name == successName })
	}
	if render(strip(got)) != render(strip(want)) {
		t.Errorf("failing collectors changed the others' samples:\n%s", render(strip(got)))
	}
}

type renamed struct {
	Collector
	name string
}

func (r renamed) Name() string { return r.name }

// TestBrokenFilesFailTheirCollector reads testdata/proc-broken: malformed
// stat, loadavg, uptime and net/dev, a meminfo without the reported fields,
// and no process entries. The short net/dev line makes procfs index out of
// range; CollectAll recovers that panic.
func TestBrokenFilesFailTheirCollector(t *testing.T) {
	cfg := Config{ProcRoot: fixtureProcBroken, SysRoot: fixtureSys}.withDefaults()
	errs := map[string]error{}
	got := CollectAllWithErrors(newCollectors(cfg, fixtureSystem()), nil, func(c string, err error) { errs[c] = err })

	wantFailed := []string{"cpu", "load", "memory", "uptime", "process", "network"}
	for _, c := range wantFailed {
		if errs[c] == nil {
			t.Errorf("collector %s did not fail on a broken file", c)
		}
	}
	if len(errs) != len(wantFailed) {
		t.Errorf("failed: %v, want exactly %v", errs, wantFailed)
	}
	if !errors.Is(errs["network"], ErrCollectorPanic) {
		t.Errorf("network error = %v, want the recovered procfs panic", errs["network"])
	}
	if !errors.Is(errs["memory"], errNoMemoryFields) {
		t.Errorf("memory error = %v, want errNoMemoryFields", errs["memory"])
	}
	if !errors.Is(errs["uptime"], errMalformedUptime) {
		t.Errorf("uptime error = %v, want errMalformedUptime", errs["uptime"])
	}
	// Thermal reads the intact sysfs fixture and still reports.
	if s := success(got); s["thermal"] != 1 || len(named(got, temperatureName)) != 2 {
		t.Errorf("thermal did not survive the broken proc root: %s", render(got))
	}
}
