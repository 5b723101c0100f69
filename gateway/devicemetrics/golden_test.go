package devicemetrics

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const goldenPath = "testdata/collectall.golden"

// renderGolden writes HELP and TYPE once per metric name, then the samples,
// in the order CollectAll returned them.
func renderGolden(samples []Sample) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, s := range samples {
		if !seen[s.Name] {
			seen[s.Name] = true
			b.WriteString("# HELP " + s.Name + " " + s.Help + "\n")
			b.WriteString("# TYPE " + s.Name + " " + s.Type.String() + "\n")
		}
		b.WriteString(s.String() + "\n")
	}
	return b.String()
}

// TestCollectAllGolden pins the complete, ordered sample list of every
// collector on the fake Raspberry Pi 4 under testdata. Run with -update to
// rewrite it after an intended change, and review the diff.
func TestCollectAllGolden(t *testing.T) {
	cs := newCollectors(fixtureConfig(), fixtureSystem())
	var failures []string
	samples := CollectAllWithErrors(cs, nil, func(c string, err error) {
		failures = append(failures, c+": "+err.Error())
	})
	if len(failures) > 0 {
		t.Errorf("collectors failed on the fixture: %v", failures)
	}
	assertContiguousNames(t, samples)
	got := renderGolden(samples)
	if *update {
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		out := filepath.Join(t.TempDir(), "got.txt")
		_ = os.WriteFile(out, []byte(got), 0o644)
		t.Errorf("output differs from %s; got written to %s:\n%s", goldenPath, out, got)
	}
	// A second run over the same files gives the same output: the order does
	// not depend on map iteration.
	if again := renderGolden(CollectAll(cs, nil)); again != got {
		t.Error("two runs on the same fixture differ")
	}
}

// assertContiguousNames checks the promise of CollectAll that all samples of
// one name form a single run, and that a name keeps one type and help.
func assertContiguousNames(t *testing.T, samples []Sample) {
	t.Helper()
	done := map[string]bool{}
	for i, s := range samples {
		if i > 0 && samples[i-1].Name == s.Name {
			if samples[i-1].Type != s.Type || samples[i-1].Help != s.Help {
				t.Errorf("%s: type or help differs within the run", s.Name)
			}
			continue
		}
		if done[s.Name] {
			t.Errorf("%s appears in more than one run (sample %d)", s.Name, i)
		}
		done[s.Name] = true
	}
}
