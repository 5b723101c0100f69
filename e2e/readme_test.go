package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// The README and docs/ are read by newcomers and by CI: these tests keep
// what they say checkable. The repository root is the e2e package's parent.
const repoRoot = ".."

// readmeMaxLines is the README's budget: a newcomer reads it in ten
// minutes; everything else lives in docs/ by topic.
const readmeMaxLines = 300

// mdFiles lists README.md and every Markdown file in docs/.
func mdFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
}

// shBlocks returns the ```sh blocks of a Markdown text in order, each as
// its lines.
func shBlocks(text string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in, cur = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// command is a shell line without its comment.
func command(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

// TestReadmeFirstScreen: the README is at most readmeMaxLines lines, its
// first screen holds the two commands (one runs a node, one runs the
// tests), the Makefile has both targets, and CI runs the README's test
// command.
func TestReadmeFirstScreen(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if n := strings.Count(text, "\n"); n > readmeMaxLines {
		t.Fatalf("README.md has %d lines, the budget is %d: move the detail to docs/", n, readmeMaxLines)
	}
	lines := strings.Split(text, "\n")
	firstScreen := strings.Join(lines[:min(len(lines), 30)], "\n")
	blocks := shBlocks(firstScreen)
	if len(blocks) == 0 {
		t.Fatal("no ```sh block in the README's first 30 lines")
	}
	var cmds []string
	for _, l := range blocks[0] {
		if c := command(l); c != "" {
			cmds = append(cmds, c)
		}
	}
	if !slices.Equal(cmds, []string{"make run", "make test"}) {
		t.Fatalf("the README's first commands are %q, want make run and make test", cmds)
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^` + target + `:`).Match(mk) {
			t.Errorf("the Makefile has no target %q", target)
		}
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	sc := bufio.NewScanner(strings.NewReader(string(ci)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, "#") && regexp.MustCompile(`(^|\s)make test$`).MatchString(l) {
			ran = true
		}
	}
	if !ran {
		t.Fatal(".ci/run does not run the README's test command, make test")
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces as '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a Markdown text's headings (code blocks
// left out; a repeated heading gets -1, -2, ... as on GitHub).
func anchors(text string) map[string]bool {
	text = fence.ReplaceAllString(text, "")
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		a := slug(m[1])
		for i := 1; out[a]; i++ {
			a = fmt.Sprintf("%s-%d", slug(m[1]), i)
		}
		out[a] = true
	}
	return out
}

// TestDocsLinks: every relative link of the README and docs/ names a file
// that exists, and every #anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	checked := 0
	for _, f := range mdFiles(t) {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(body), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: %v", f, link, err)
				continue
			}
			checked++
			if anchor == "" {
				continue
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(tb))[anchor] {
				t.Errorf("%s: link %s: no heading with the anchor #%s in %s", f, link, anchor, target)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links found: is the link pattern still right?", checked)
	}
}

// TestCodeLayoutListsEveryPackage: docs/code-layout.md, the one place the
// layout is described, names every package of the module, and every
// package it names exists. A package added, moved or removed updates it.
func TestCodeLayoutListsEveryPackage(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(repoRoot, "docs", "code-layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The packages are the first column of the table headed "| package |".
	named := map[string]bool{}
	cell := regexp.MustCompile("`([a-z0-9_./]+)`")
	in := false
	for _, line := range strings.Split(string(body), "\n") {
		switch {
		case strings.HasPrefix(line, "| package |"):
			in = true
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
		}
		if !in {
			continue
		}
		for _, m := range cell.FindAllStringSubmatch(strings.Split(line, "|")[1], -1) {
			named[m[1]] = true
		}
	}
	if len(named) < 10 {
		t.Fatalf("docs/code-layout.md: only %d packages found in its table headed | package |", len(named))
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	pkgs := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		pkgs[rel] = true
		if !named[rel] {
			missing = append(missing, rel)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/code-layout.md does not name the packages %v: add them to its table", missing)
	}
	for p := range named {
		if !pkgs[p] {
			t.Errorf("docs/code-layout.md names %s, which is not a package of the module", p)
		}
	}
}

// TestConfigReference: the block under "Every key and its default" in
// docs/configuration.md is what the binary prints with --print-config on
// embedded defaults (no file, no EDGEQ_* variable).
func TestConfigReference(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(repoRoot, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(body), "\n## Every key and its default\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no section "Every key and its default"`)
	}
	_, block, ok := strings.Cut(section, "\n```yaml\n")
	block, _, ok2 := strings.Cut(block, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/configuration.md: no ```yaml block under \"Every key and its default\"")
	}
	cmd := exec.Command(edgeqBin, "run", "--print-config")
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EDGEQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("edgeq run --print-config: %v\n%s", err, out)
	}
	got, want := strings.TrimRight(string(out), "\n"), strings.TrimRight(block, "\n")
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gl), len(wl)) {
		g, w := "", ""
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("docs/configuration.md's key reference differs from `edgeq run --print-config` at line %d:\n  docs:   %q\n  binary: %q\npaste the binary's output (bin/edgeq run --print-config, without EDGEQ_* variables) into the block", i+1, w, g)
		}
	}
}

// tourShell runs README lines with bash in dir, each in its own process
// group (a line may leave jobs behind with &), against node n: the nats
// CLI through NATS_URL, bin/edgeq through $EDGEQ_SERVER and $EDGEQ_HTTP,
// and the README's HTTP address replaced by the node's.
type tourShell struct {
	t    *testing.T
	n    *node
	dir  string
	env  []string
	pgid []int
}

func newTourShell(t *testing.T, n *node) *tourShell {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(edgeqBin, filepath.Join(dir, "bin", "edgeq")); err != nil {
		t.Fatal(err)
	}
	s := &tourShell{t: t, n: n, dir: dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EDGEQ_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "NATS_URL="+n.url(), "EDGEQ_SERVER="+n.url(), "EDGEQ_HTTP="+n.httpURL(),
		"XDG_CONFIG_HOME="+t.TempDir()) // no nats CLI context of this machine's user
	t.Cleanup(s.killAll)
	return s
}

func (s *tourShell) cmd(line string, out *syncBuffer) *exec.Cmd {
	line = strings.ReplaceAll(line, "http://127.0.0.1:8222", s.n.httpURL())
	c := exec.Command("bash", "-c", line)
	c.Dir, c.Env = s.dir, s.env
	c.Stdout, c.Stderr = out, out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// start starts a line that runs until it is killed.
func (s *tourShell) start(line string) (*exec.Cmd, *syncBuffer) {
	out := &syncBuffer{}
	c := s.cmd(line, out)
	if err := c.Start(); err != nil {
		s.t.Fatalf("%s: %v", line, err)
	}
	s.pgid = append(s.pgid, c.Process.Pid)
	go c.Wait()
	return c, out
}

// run runs a line to its end (within a minute) and returns its output;
// jobs it left behind run on until killAll.
func (s *tourShell) run(line string) string {
	s.t.Helper()
	out := &syncBuffer{}
	c := s.cmd(line, out)
	if err := c.Start(); err != nil {
		s.t.Fatalf("%s: %v", line, err)
	}
	s.pgid = append(s.pgid, c.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("README line %q: %v\n%s", line, err, out.String())
		}
	case <-time.After(time.Minute):
		s.t.Fatalf("README line %q still runs after a minute:\n%s", line, out.String())
	}
	return out.String()
}

func (s *tourShell) kill(c *exec.Cmd) { syscall.Kill(-c.Process.Pid, syscall.SIGINT) }

func (s *tourShell) killAll() {
	for _, p := range s.pgid {
		syscall.Kill(-p, syscall.SIGKILL)
	}
}

// syncBuffer is an output buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tourGroup reads the tour's queue group from /v1/status: members and lag.
func tourGroup(t *testing.T, n *node) (members int, lag uint64, ok bool) {
	gs, _ := statusJSON(t, n, "")["groups"].([]any)
	for _, g := range gs {
		g := g.(map[string]any)
		if g["queue"] == "uploader" {
			return int(g["members"].(float64)), uint64(g["lag"].(float64)), true
		}
	}
	return 0, 0, false
}

// TestReadmeTour runs the README's five-minute tour, its commands as they
// are written, against a node (on test ports instead of make run's): two
// workers join the queue group, the publishes are acknowledged and
// delivered, the watch commands show the group, and after the workers stop
// and one comes back the lag drains to 0.
func TestReadmeTour(t *testing.T) {
	requireTool(t, "nats")
	requireTool(t, "curl")
	body, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(body), "\n## A five-minute tour\n")
	if !ok {
		t.Fatal("README.md has no section \"A five-minute tour\"")
	}
	tour, _, _ = strings.Cut(tour, "\n## ")
	var blocks [][]string
	for _, b := range shBlocks(tour) {
		var cmds []string
		for _, l := range b {
			if c := command(l); c != "" {
				cmds = append(cmds, c)
			}
		}
		blocks = append(blocks, cmds)
	}
	if len(blocks) != 4 || !slices.Equal(blocks[0], []string{"make run"}) || len(blocks[1]) != 2 {
		t.Fatalf("the tour's blocks changed (want make run; two workers; publishes; watch commands): %q", blocks)
	}
	workers, publishes, watch := blocks[1], blocks[2], blocks[3]

	n := newNode(t, "")
	n.start()
	sh := newTourShell(t, n)
	var ws []*exec.Cmd
	var outs []*syncBuffer
	for _, w := range workers {
		c, out := sh.start(w)
		ws, outs = append(ws, c), append(outs, out)
	}
	waitFor(t, "the two workers in the group", 30*time.Second, func() bool {
		m, _, ok := tourGroup(t, n)
		return ok && m == 2
	})
	var meters *exec.Cmd
	for _, p := range publishes {
		if strings.HasSuffix(p, "done") { // the five devices' loop leaves jobs behind
			meters, _ = sh.start(p)
			continue
		}
		out := sh.run(p)
		if !strings.Contains(out, `"seq":1`) && !strings.Contains(out, `"seq": 1`) {
			t.Fatalf("README line %q: no acknowledgement with seq 1:\n%s", p, out)
		}
	}
	if meters == nil {
		t.Fatal("the tour's publishes have no loop of five devices")
	}
	delivered := func(subjects ...string) bool {
		all := outs[0].String() + outs[1].String()
		for _, s := range subjects {
			if !strings.Contains(all, s) {
				return false
			}
		}
		return true
	}
	waitFor(t, "every device's messages at the workers", 60*time.Second, func() bool {
		return delivered("telemetry.sensor-1", "telemetry.sensor-2", "telemetry.sensor-3",
			"telemetry.meter-1", "telemetry.meter-2", "telemetry.meter-3", "telemetry.meter-4", "telemetry.meter-5")
	})

	for _, w := range watch {
		if strings.Contains(w, "--watch") {
			c, out := sh.start(w)
			waitFor(t, "edgeq status --watch shows the group", 30*time.Second, func() bool {
				return strings.Contains(out.String(), "uploader") && strings.Contains(out.String(), "LAG")
			})
			sh.kill(c)
			continue
		}
		out := sh.run(w)
		if !strings.Contains(out, "uploader") {
			t.Fatalf("README line %q does not show the group uploader:\n%s", w, out)
		}
	}

	// Both workers stop: the group stays, without members, and its lag
	// grows while the meters publish.
	for _, c := range ws {
		sh.kill(c)
	}
	waitFor(t, "the group without members, its lag growing", 60*time.Second, func() bool {
		m, lag, ok := tourGroup(t, n)
		return ok && m == 0 && lag >= 5
	})
	// A worker comes back: the backlog drains (the meters stopped first,
	// so that the lag can settle at 0).
	sh.kill(meters)
	sh.start(workers[1])
	waitFor(t, "the lag back at 0", 60*time.Second, func() bool {
		m, lag, ok := tourGroup(t, n)
		return ok && m == 1 && lag == 0
	})
}
