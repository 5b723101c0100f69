package election

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tiny data-driven test runner in the style of etcd raft's testdata:
// a script is a sequence of cases
//
//	# optional comment lines
//	command arg key=value ...
//	----
//	expected output
//	<blank line>
//
// Each command runs against a fresh-per-file harness (a simulated cluster,
// sim_test.go; commands in harness_test.go) and its output is compared with
// the expected text. An invariant violation fails the test even with -rewrite. `go test -run TestScenarios -rewrite`
// regenerates the expected output; every run is byte-identical.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

type scriptCase struct {
	comments []string
	cmd      string
	line     int
	want     string
}

func parseScript(path string) ([]scriptCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open script: %w", err)
	}
	defer f.Close()
	var cases []scriptCase
	var cur scriptCase
	sc := bufio.NewScanner(f)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
			cur.comments = append(cur.comments, line)
		case strings.TrimSpace(line) == "":
			// separates cases; a comment block followed by a blank line stays attached
			if len(cur.comments) > 0 && cur.comments[len(cur.comments)-1] != "" {
				cur.comments = append(cur.comments, "")
			}
		default:
			cur.cmd, cur.line = strings.TrimSpace(line), lineNo
			if !sc.Scan() || sc.Text() != "----" {
				return nil, fmt.Errorf("%s:%d: command without ---- separator", path, lineNo)
			}
			lineNo++
			var want []string
			for sc.Scan() {
				lineNo++
				if sc.Text() == "" {
					break
				}
				want = append(want, sc.Text())
			}
			cur.want = strings.Join(want, "\n")
			cases = append(cases, cur)
			cur = scriptCase{}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read script %s: %w", path, err)
	}
	if len(cur.comments) > 0 {
		cases = append(cases, cur) // trailing comments only
	}
	return cases, nil
}

func formatScript(cases []scriptCase) string {
	var b strings.Builder
	for i, c := range cases {
		for _, l := range c.comments {
			b.WriteString(l + "\n")
		}
		if c.cmd == "" {
			continue
		}
		b.WriteString(c.cmd + "\n----\n" + c.want + "\n")
		if i < len(cases)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, err := parseScript(path)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness()
			for i := range cases {
				c := &cases[i]
				if c.cmd == "" {
					continue
				}
				got := strings.TrimRight(h.run(c.cmd), "\n")
				if got == "" {
					got = "ok"
				}
				if strings.Contains(got, "VIOLATION") { // never golden, even with -rewrite
					t.Errorf("%s:%d: %s: invariant violated:\n%s", path, c.line, c.cmd, got)
				}
				if *rewrite {
					c.want = got
					continue
				}
				if got != c.want {
					t.Errorf("%s:%d: %s\n--- got\n%s\n--- want\n%s", path, c.line, c.cmd, got, c.want)
				}
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(formatScript(cases)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Same script twice → same transcript: nothing depends on map order or the wall clock.
func TestScenariosDeterministic(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, path := range files {
		cases, err := parseScript(path)
		if err != nil {
			t.Fatal(err)
		}
		var runs [2]strings.Builder
		for r := range runs {
			h := newHarness()
			for _, c := range cases {
				if c.cmd != "" {
					runs[r].WriteString(h.run(c.cmd))
				}
			}
		}
		if runs[0].String() != runs[1].String() {
			t.Errorf("%s: two runs differ", path)
		}
	}
}
