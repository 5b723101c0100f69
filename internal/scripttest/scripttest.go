// Package scripttest runs data-driven scenario scripts in the style of etcd
// raft's testdata, for the pure state machines (queue dispatch, election):
//
//	# optional comment lines
//	command arg key=value ...
//	----
//	expected output
//	<blank line>
//
// Each file gets a fresh harness; every command's output is compared with the
// expected text. With rewrite the expected output is regenerated; every run
// must be byte-identical.
package scripttest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Case is one command of a script with its expected output.
type Case struct {
	comments []string
	cmd      string
	line     int
	want     string
}

// Parse reads a script.
func Parse(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open script: %w", err)
	}
	defer f.Close()
	var cases []Case
	var cur Case
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
			cur = Case{}
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

// Format writes cases back as a script.
func Format(cases []Case) string {
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

// Harness runs one command and returns its output.
type Harness func(cmd string) string

// Run runs every dir/*.txt script with a fresh harness per file. check, when
// not nil, is applied to every output and fails the test even with rewrite
// (for invariant violations that must never become golden).
func Run(t *testing.T, dir string, newHarness func() Harness, rewrite bool, check func(got string) error) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, err := Parse(path)
			if err != nil {
				t.Fatal(err)
			}
			run := newHarness()
			for i := range cases {
				c := &cases[i]
				if c.cmd == "" {
					continue
				}
				got := strings.TrimRight(run(c.cmd), "\n")
				if got == "" {
					got = "ok"
				}
				if check != nil {
					if err := check(got); err != nil {
						t.Errorf("%s:%d: %s: %v:\n%s", path, c.line, c.cmd, err, got)
					}
				}
				if rewrite {
					c.want = got
					continue
				}
				if got != c.want {
					t.Errorf("%s:%d: %s\n--- got\n%s\n--- want\n%s", path, c.line, c.cmd, got, c.want)
				}
			}
			if rewrite {
				if err := os.WriteFile(path, []byte(Format(cases)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Deterministic runs every script twice and fails if the transcripts differ:
// nothing may depend on map order or the wall clock.
func Deterministic(t *testing.T, dir string, newHarness func() Harness) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	for _, path := range files {
		cases, err := Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		var runs [2]strings.Builder
		for r := range runs {
			run := newHarness()
			for _, c := range cases {
				if c.cmd != "" {
					runs[r].WriteString(run(c.cmd))
				}
			}
		}
		if runs[0].String() != runs[1].String() {
			t.Errorf("%s: two runs differ", path)
		}
	}
}
