package queue

import (
	"flag"
	"testing"

	"edgeq/internal/scripttest"
)

// Scenario scripts under testdata (format in internal/scripttest); each file
// runs against a fresh harness (harness_test.go). `go test -run TestScenarios
// -rewrite` regenerates the expected output; every run is byte-identical.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

func scriptHarness() scripttest.Harness { return newHarness().run }

func TestScenarios(t *testing.T) {
	scripttest.Run(t, "testdata", scriptHarness, *rewrite, nil)
}

func TestScenariosDeterministic(t *testing.T) {
	scripttest.Deterministic(t, "testdata", scriptHarness)
}
