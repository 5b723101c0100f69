// Package e2e tests the real edgeq binary as separate processes, with real
// NATS clients (nats.go, the nats CLI) on loopback.
package e2e

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// edgeqBin is the native binary for client commands; nodeBin (and its
// wrapper, e.g. qemu-aarch64-static) runs the node under test: the firmware
// tests point them at a cross-built binary under qemu-user.
var (
	edgeqBin    string
	nodeBin     string
	nodeWrapper = os.Getenv("EDGEQ_E2E_WRAPPER")
)

// TestMain builds the binary once for the whole package.
//
// Tests run one after another, except two long ones that mostly wait on
// the clock (paced publishers) or build a tool: they call t.Parallel and run
// side by side after the others. Each has its own node, ports and temp dirs
// and asserts no absolute speed. Tests that mount a power-cut file system
// stay serial: with two mounts in the process (and with a node started
// while one unmounted), tests hung for minutes and came free at the same
// instant. This package is the longest of make unit: its wall time is what
// CI waits for.
func TestMain(m *testing.M) {
	if os.Getenv(nsqHelperEnv) != "" {
		os.Exit(nsqHelperMain()) // a consumer process for TestNSQConsumers to kill
	}
	dir, err := os.MkdirTemp("", "edgeq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	edgeqBin = filepath.Join(dir, "edgeq")
	args := []string{"build", "-o", edgeqBin}
	if os.Getenv("EDGEQ_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "edgeq/cmd/edgeq")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build edgeq:", err)
		os.Exit(1)
	}
	nodeBin = edgeqBin
	nsqToolsDir = filepath.Join(dir, "nsqtools")
	if b := os.Getenv("EDGEQ_E2E_BIN"); b != "" {
		nodeBin = b
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
//
// A port is handed out once per test process, and it is taken below the
// kernel's ephemeral range where there is room: a port from bind(0) is free
// when it is closed again, so two calls could return the same one (a CI run
// started two nodes on one NATS port), and a client connection's local port
// could take it before the node binds it.
func freePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := portsBelowEphemeral()
	for range 10000 {
		p := 0
		if hi > lo {
			p = lo + rand.IntN(hi-lo)
			if portsGiven[p] {
				continue
			}
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			if hi > lo {
				continue // in use
			}
			t.Fatal(err)
		}
		p = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !portsGiven[p] {
			portsGiven[p] = true
			return p
		}
	}
	t.Fatal("freePort: no free loopback port found")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// portsBelowEphemeral is the range freePort picks from: from 10000 up to the
// start of net.ipv4.ip_local_port_range, or none (bind(0)) when that starts
// too low to leave room. With EDGEQ_E2E_PORTS=K/N (scripts/e2e.sh runs the
// package as N test processes side by side) it is the K-th of N slices of
// that range, so that two processes never hand out the same port.
func portsBelowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first < 12000 {
		return 0, 0
	}
	lo, hi = 10000, first
	if s := os.Getenv("EDGEQ_E2E_PORTS"); s != "" {
		var k, n int
		if _, err := fmt.Sscanf(s, "%d/%d", &k, &n); err != nil || n < 1 || k < 0 || k >= n {
			panic(fmt.Sprintf("EDGEQ_E2E_PORTS=%q: want K/N with 0 <= K < N", s))
		}
		width := (hi - lo) / n
		lo += k * width
		hi = lo + width
	}
	return lo, hi
}

// node is one edgeq process.
type node struct {
	t        testing.TB
	dataDir  string
	natsPort int
	httpPort int
	config   string // YAML file, may be empty
	nodeID   string // default e2e-node
	bin      string // the binary to run, without nodeWrapper; default nodeBin
	env      []string
	cmd      *exec.Cmd
	logMu    sync.Mutex
	log      strings.Builder
	exited   chan struct{}

	// netns runs the node in that network namespace (ip netns exec); client
	// then reaches its HTTP API there. Empty: the test's own namespace.
	netns  string
	client *http.Client
	// https: the node serves HTTPS (client then trusts its CA).
	https bool
}

func newNode(t testing.TB, yaml string, env ...string) *node {
	t.Helper()
	n := &node{t: t, dataDir: filepath.Join(t.TempDir(), "data"), natsPort: freePort(t), httpPort: freePort(t), env: env, nodeID: "e2e-node"}
	if yaml != "" {
		n.config = filepath.Join(t.TempDir(), "edgeq.yaml")
		if err := os.WriteFile(n.config, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if n.running() {
			n.kill()
		}
		if t.Failed() {
			t.Logf("node log:\n%s", n.logs())
		}
	})
	return n
}

func (n *node) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.natsPort) }
func (n *node) httpURL() string {
	if n.https {
		return fmt.Sprintf("https://127.0.0.1:%d", n.httpPort)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", n.httpPort)
}

// httpClient reaches the node's HTTP API (inside its namespace, if any).
func (n *node) httpClient() *http.Client {
	if n.client != nil {
		return n.client
	}
	return http.DefaultClient
}

func (n *node) logs() string {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	return n.log.String()
}

// start runs the node and waits until /readyz answers.
func (n *node) start() {
	n.t.Helper()
	args := []string{"run", "--data", n.dataDir, "--nats", fmt.Sprintf("127.0.0.1:%d", n.natsPort),
		"--http", fmt.Sprintf("127.0.0.1:%d", n.httpPort), "--node-id", n.nodeID}
	if n.config != "" {
		args = append(args, "--config", n.config)
	}
	argv := append([]string{nodeBin}, args...)
	if n.bin != "" {
		argv = append([]string{n.bin}, args...)
	} else if nodeWrapper != "" {
		argv = append([]string{nodeWrapper}, argv...)
	}
	if n.netns != "" {
		// ip netns exec execs the node in place: the pid is the node's.
		argv = append([]string{"ip", "netns", "exec", n.netns}, argv...)
	}
	n.cmd = exec.Command(argv[0], argv[1:]...)
	if n.netns != "" {
		// A node left behind by a killed test process would keep its
		// namespace (and its multicast) alive.
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	// The harness's own EDGEQ_E2E_* variables are not the node's settings.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EDGEQ_E2E_") {
			n.cmd.Env = append(n.cmd.Env, kv)
		}
	}
	n.cmd.Env = append(n.cmd.Env, n.env...)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	n.cmd.Stdout = io.Discard
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			n.logMu.Lock()
			if n.log.Len() < 4<<20 {
				n.log.WriteString(sc.Text() + "\n")
			}
			n.logMu.Unlock()
		}
		n.cmd.Wait()
		close(n.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := n.httpClient().Get(n.httpURL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-n.exited:
			n.t.Fatalf("node exited at start: %s", n.logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
	n.t.Fatalf("node not ready: %s", n.logs())
}

func (n *node) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill ends the node with SIGKILL.
func (n *node) kill() {
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop sends SIGTERM and returns the exit code.
func (n *node) stop() int {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		n.t.Fatalf("node did not stop on SIGTERM: %s", n.logs())
	}
	return n.cmd.ProcessState.ExitCode()
}

// waitFor polls cond until it holds. timeout only bounds a hang: a wait
// is never shorter than waitFloor, since what takes a second on an idle
// machine can take ten at a load of 30.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	timeout = max(timeout, waitFloor)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const waitFloor = 60 * time.Second

// requireTool finds an external program; missing is a skip, or a failure
// with CI=true.
func requireTool(t testing.TB, name string, extra ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range extra {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed, and CI=true", name)
	}
	t.Skipf("%s is not installed", name)
	return ""
}

// runCmd runs a program with a time limit and returns its combined output.
func runCmd(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("%s timed out", name)
	}
}

// goBin is where go install puts a tool.
func goBin(name string) string {
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return name
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", name)
}
