package election

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"edgeq/internal/scripttest"
)

// Scenario scripts under testdata (format in internal/scripttest); each file
// runs against a fresh simulated cluster (sim_test.go; commands in
// harness_test.go). An invariant violation fails the test even with
// -rewrite. `go test -run TestScenarios -rewrite` regenerates the expected
// output; every run is byte-identical.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

func scriptHarness() scripttest.Harness { return newHarness().run }

func TestScenarios(t *testing.T) {
	scripttest.Run(t, "testdata", scriptHarness, *rewrite, func(got string) error {
		if strings.Contains(got, "VIOLATION") { // never golden, even with -rewrite
			return errors.New("invariant violated")
		}
		return nil
	})
}

func TestScenariosDeterministic(t *testing.T) {
	scripttest.Deterministic(t, "testdata", scriptHarness)
}
