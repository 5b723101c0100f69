package mdns

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The multicast tests build a private LAN: a bridge in one network namespace
// and one namespace per node, joined by veth pairs (eth0 in the node,
// 10.251.0.<i>/24, with the multicast route on eth0). Nothing leaves these
// namespaces. Each node is this test binary run inside its namespace with
// ip netns exec and roleEnv naming what it does (see roles_test.go).

const (
	roleEnv    = "EDGEQ_MDNS_TEST_ROLE"
	nsPrefix   = "eqmdns"
	lanSubnet  = "10.251.0."
	lanIfName  = "eth0"
	waitWindow = 10 * time.Second
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}

// requireNetns skips the test (fails it when CI=true) when network
// namespaces cannot be created here.
func requireNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multicast test in network namespaces: not in -short mode")
	}
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (iproute2)"
	}
	if why == "" {
		name := fmt.Sprintf("%s%d-probe%d", nsPrefix, os.Getpid(), nsCounter.Add(1))
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			why = fmt.Sprintf("ip netns add: %v: %s", err, out)
		} else {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("network namespaces are required in CI: %s", why)
	}
	t.Skipf("network namespaces unavailable: %s", why)
}

var nsCounter atomic.Int64

// lan is a bridge namespace and node namespaces.
type lan struct {
	t      *testing.T
	bridge string
	nodes  []string // nodes[i] has address 10.251.0.<i+1>
}

// newLAN creates n node namespaces on one bridge; Cleanup removes them.
func newLAN(t *testing.T, n int) *lan {
	t.Helper()
	requireNetns(t)
	removeStaleNamespaces(t)
	base := fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), nsCounter.Add(1))
	l := &lan{t: t, bridge: base + "-br"}
	t.Cleanup(l.destroy)
	l.ip("netns", "add", l.bridge)
	l.ip("-n", l.bridge, "link", "set", "lo", "up")
	l.ip("-n", l.bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", l.bridge, "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-n%d", base, i)
		l.ip("netns", "add", ns)
		l.nodes = append(l.nodes, ns)
		port := fmt.Sprintf("p%d", i)
		l.ip("-n", l.bridge, "link", "add", port, "type", "veth", "peer", "name", lanIfName, "netns", ns)
		l.ip("-n", l.bridge, "link", "set", port, "master", "br0", "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.ip("-n", ns, "addr", "add", fmt.Sprintf("%s%d/24", lanSubnet, i), "dev", lanIfName)
		l.ip("-n", ns, "link", "set", lanIfName, "up")
		l.ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", lanIfName)
	}
	return l
}

func (l *lan) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (l *lan) destroy() {
	for _, ns := range append([]string{l.bridge}, l.nodes...) {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Logf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
}

// removeStaleNamespaces deletes namespaces this package's tests left behind
// when a test process was killed: their names carry the dead process's pid.
func removeStaleNamespaces(t *testing.T) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pidStr)); err == nil {
			continue // its test process still runs
		}
		if exec.Command("ip", "netns", "del", e.Name()).Run() == nil {
			t.Logf("removed stale namespace %s (pid %d is gone)", e.Name(), pid)
		}
	}
}

// addr is the LAN address of node namespace i (0-based).
func (l *lan) addr(i int) string { return fmt.Sprintf("%s%d", lanSubnet, i+1) }

// child is a role process inside a namespace. Its stdout carries
// "KEY json" lines; its stderr is the log, shown when the test fails.
type child struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	mu     sync.Mutex
	lines  map[string][]string // key → payloads, in order
	stderr bytes.Buffer
	code   int
}

// spawn runs role in namespace ns with env (KEY=value) added.
func (l *lan) spawn(name, ns, role string, env ...string) *child {
	l.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	c := &child{t: l.t, name: name, done: make(chan struct{}), lines: map[string][]string{}, code: -1}
	c.cmd = exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	c.cmd.Stderr = lockedWriter{&c.mu, &c.stderr}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		l.t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		l.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			key, payload, _ := strings.Cut(sc.Text(), " ")
			c.mu.Lock()
			c.lines[key] = append(c.lines[key], payload)
			c.mu.Unlock()
		}
		err := c.cmd.Wait()
		c.mu.Lock()
		c.code = c.cmd.ProcessState.ExitCode()
		if err != nil && c.code == -1 {
			fmt.Fprintf(&c.stderr, "wait: %v\n", err)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	l.t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill() // our own child, by pid
			<-c.done
		}
		if l.t.Failed() {
			c.mu.Lock()
			l.t.Logf("--- %s log ---\n%s", name, c.stderr.String())
			c.mu.Unlock()
		}
	})
	return c
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// send writes a command line to the child's stdin.
func (c *child) send(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		c.t.Fatalf("%s: send %q: %v", c.name, cmd, err)
	}
}

// last returns the last payload of key, if any.
func (c *child) last(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.lines[key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// all returns every payload of key so far.
func (c *child) all(key string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines[key]...)
}

// waitKey waits until the child printed key, and returns the payload.
func (c *child) waitKey(key string, within time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if v, ok := c.last(key); ok {
			return v
		}
		select {
		case <-c.done:
			c.t.Fatalf("%s exited (code %d) before printing %s", c.name, c.exitCode(), key)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not print %s within %v", c.name, key, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) exitCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code
}

// peers returns the child's last reported peer list.
func (c *child) peers() []Peer {
	c.t.Helper()
	v, ok := c.last("PEERS")
	if !ok {
		return nil
	}
	var ps []Peer
	if err := json.Unmarshal([]byte(v), &ps); err != nil {
		c.t.Fatalf("%s: peers %q: %v", c.name, v, err)
	}
	return ps
}

// waitPeers waits until the child's peer IDs are want, and returns the time
// it took and the peers.
func (c *child) waitPeers(within time.Duration, want ...string) (time.Duration, []Peer) {
	c.t.Helper()
	start := time.Now()
	for {
		ps := c.peers()
		if strings.Join(ids(ps), ",") == strings.Join(want, ",") {
			return time.Since(start), ps
		}
		if time.Since(start) > within {
			c.t.Fatalf("%s: peers %v after %v, want %v", c.name, ids(ps), within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
