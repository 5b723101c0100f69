package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
)

// The LAN harness: a private Ethernet segment built from network namespaces,
// with one real edgeq process per namespace.
//
//	l := newLAN(t, 3)                       // bridge namespace + 3 node namespaces
//	ns := l.startNodes(lanSpec{ID: "gw-a", Priority: 1}, ...) // node i in namespace i
//	nc := ns[0].nats()                      // a nats.Conn to node 0, inside its namespace
//	st, err := ns[1].status()               // node 1's /v1/status
//	l.setLink(2, false)                     // pull node 2's cable; l.setLink(2, true) plugs it back
//	ns[2].kill(); ns[2].restart()           // kill -9, then the same data dir and node ID again
//
// A bridge (br0, multicast snooping off) lives in its own namespace; node
// namespace i is joined to it by a veth pair (p<i> on the bridge, eth0 in the
// node, 10.252.<k>.<i+1>/24 with the multicast route on eth0, lo up), where
// k numbers the LANs of this test process. A node listens for NATS and HTTP
// on 127.0.0.1 inside its namespace (loopback: no auth token needed) and for
// peers on its eth0 address, finds its peers by mDNS on eth0 alone (no static
// peers), and the test reaches it through a dialer that enters the
// namespace. Every packet stays inside namespaces the test created.
//
// Namespaces are named eqlan<pid>-<k>-br and eqlan<pid>-<k>-n<i>: newLAN
// removes those of test processes that are gone, and Cleanup removes a LAN's
// own after its nodes have stopped (cleanups run last-in first-out).

const (
	lanPrefix   = "eqlan"
	lanIf       = "eth0"
	lanNATSPort = 4222 // inside each node's namespace
	lanHTTPPort = 8222
	lanPeerPort = 7422
	lanCluster  = "plant"
	lanSecret   = "lan-harness-cluster-secret-0123456789"
	// lanGroup is the status key of the group every LAN node declares by
	// default (lanSpec.Groups).
	lanGroup = "telemetry.> up"
)

var lanCounter atomic.Int64

// requireNetns skips the test when network namespaces cannot be made here
// (not root, no ip command, no permission), and fails it when CI=true.
func requireNetns(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (apt-get install iproute2)"
	}
	if why == "" {
		name := fmt.Sprintf("%s%d-probe%d", lanPrefix, os.Getpid(), lanCounter.Add(1))
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			why = fmt.Sprintf("ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
		} else {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("network namespaces are required with CI=true: %s", why)
	}
	t.Skipf("network namespaces unavailable: %s", why)
}

// lan is one bridge namespace and its node namespaces.
type lan struct {
	t      *testing.T
	k      int // third octet of the node addresses
	bridge string
	nodes  []string // nodes[i]: namespace of slot i, address 10.252.k.(i+1)
	// goroutines is the count when the LAN was made: at teardown, after
	// every node, connection and helper of the test has been cleaned up,
	// the count must come back to it (the e2e tests do not run in parallel).
	goroutines int
}

// newLAN creates n node namespaces on one bridge.
func newLAN(t *testing.T, n int) *lan {
	t.Helper()
	requireNetns(t)
	removeStaleLANs(t)
	seq := int(lanCounter.Add(1))
	base := fmt.Sprintf("%s%d-%d", lanPrefix, os.Getpid(), seq)
	l := &lan{t: t, k: seq%250 + 1, bridge: base + "-br", goroutines: runtime.NumGoroutine()}
	t.Cleanup(l.destroy)
	l.ip("netns", "add", l.bridge)
	l.ip("-n", l.bridge, "link", "set", "lo", "up")
	l.ip("-n", l.bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	l.ip("-n", l.bridge, "link", "set", "br0", "up")
	for i := range n {
		ns := fmt.Sprintf("%s-n%d", base, i)
		l.ip("netns", "add", ns)
		l.nodes = append(l.nodes, ns)
		l.ip("-n", l.bridge, "link", "add", l.port(i), "type", "veth", "peer", "name", lanIf, "netns", ns)
		l.ip("-n", l.bridge, "link", "set", l.port(i), "master", "br0", "up")
		l.ip("-n", ns, "link", "set", "lo", "up")
		l.ip("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", lanIf)
		l.ip("-n", ns, "link", "set", lanIf, "up")
		l.ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", lanIf)
	}
	return l
}

func (l *lan) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// destroy runs after everything the test started in the LAN has been
// cleaned up: it reports processes still in its namespaces and goroutines
// that outlived the test, and deletes the namespaces.
func (l *lan) destroy() {
	for _, ns := range append([]string{l.bridge}, l.nodes...) {
		if out, _ := exec.Command("ip", "netns", "pids", ns).Output(); len(strings.TrimSpace(string(out))) > 0 {
			l.t.Errorf("processes left in namespace %s: %s", ns, strings.Fields(string(out)))
		}
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Logf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > l.goroutines && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > l.goroutines {
		buf := make([]byte, 1<<20)
		l.t.Errorf("%d goroutines outlived the test (%d before the LAN):\n%s", n-l.goroutines, l.goroutines, buf[:runtime.Stack(buf, true)])
	}
}

// ns is the namespace of slot i; addr its eth0 address; port the bridge
// side of its veth.
func (l *lan) ns(i int) string   { return l.nodes[i] }
func (l *lan) addr(i int) string { return fmt.Sprintf("10.252.%d.%d", l.k, i+1) }
func (l *lan) port(i int) string { return fmt.Sprintf("p%d", i) }

// setLink takes slot i's link down (false) or up: the bridge side of its
// veth, as if its cable were pulled. The node keeps its eth0, address and
// routes; its carrier goes and comes back, and nothing passes meanwhile.
func (l *lan) setLink(i int, up bool) {
	l.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	l.ip("-n", l.bridge, "link", "set", l.port(i), state)
}

// command is argv run in slot i's namespace, with env added to ours.
func (l *lan) command(i int, env []string, argv ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.ns(i)}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs argv in slot i's namespace with a time limit and returns its
// combined output.
func (l *lan) run(i int, env []string, timeout time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := l.command(i, env, argv...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() }) // our child, by pid
	err := cmd.Wait()
	if !stop() && ctx.Err() != nil {
		err = fmt.Errorf("%s: timed out after %v", argv[0], timeout)
	}
	return out.String(), err
}

// removeStaleLANs deletes namespaces of this harness whose test process is
// gone (killed before its cleanup ran): their names carry its pid. Node
// processes die with the test process (Pdeathsig); any still inside are
// reported, not killed.
func removeStaleLANs(t testing.TB) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), lanPrefix)
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
		if out, _ := exec.Command("ip", "netns", "pids", e.Name()).Output(); len(strings.TrimSpace(string(out))) > 0 {
			t.Logf("stale namespace %s still holds processes %s", e.Name(), strings.Fields(string(out)))
		}
		if exec.Command("ip", "netns", "del", e.Name()).Run() == nil {
			t.Logf("removed stale namespace %s (pid %d is gone)", e.Name(), pid)
		}
	}
}

// nsDialer dials from inside a network namespace. It serves nats.go
// (nats.SetCustomDialer: connects and reconnects) and net/http
// (Transport.DialContext).
type nsDialer struct {
	ns      string
	timeout time.Duration // for Dial; DialContext uses its context
}

// Dial is nats.CustomDialer's method.
func (d nsDialer) Dial(network, addr string) (net.Conn, error) {
	timeout := d.timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, addr)
}

// DialContext dials addr in the namespace. The socket is created there, on
// a thread that has entered the namespace, and stays there: a socket belongs
// to the namespace it was created in, whichever thread uses it later.
func (d nsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is this goroutine's alone while it is in the other
		// namespace. If it cannot be brought back, the goroutine ends still
		// locked and the runtime throws the thread away.
		runtime.LockOSThread()
		c, err, restored := dialInNetns(ctx, d.ns, network, addr)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialInNetns runs on a locked thread: it enters ns, dials, and returns to
// the thread's own namespace; restored is false when that failed.
func dialInNetns(ctx context.Context, ns, network, addr string) (c net.Conn, err error, restored bool) {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netns: own namespace: %w", err), true
	}
	defer unix.Close(orig)
	target, err := unix.Open(filepath.Join("/var/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", ns, err), true
	}
	err = unix.Setns(target, unix.CLONE_NEWNET)
	unix.Close(target)
	if err != nil {
		return nil, fmt.Errorf("netns %s: setns: %w", ns, err), true // still in our own
	}
	var dl net.Dialer
	c, err = dl.DialContext(ctx, network, addr)
	if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
		return c, err, false
	}
	return c, err, true
}

// lanSpec configures a LAN node. Zero fields take the defaults shown.
type lanSpec struct {
	ID       string // node ID, required
	Priority int
	Secret   string // lanSecret
	Cluster  string // lanCluster
	// Groups are YAML flow maps under groups:, nil: the one lanGroup,
	// "{subject: telemetry.>, queue: up}".
	Groups []string
	// HeartbeatInterval and FailureTimeout: 100ms and 1s.
	HeartbeatInterval, FailureTimeout time.Duration
	// YAML is more top-level configuration, e.g. "queue:\n  ack_wait: 2s\n".
	YAML string
}

func (s lanSpec) withDefaults() lanSpec {
	if s.Secret == "" {
		s.Secret = lanSecret
	}
	if s.Cluster == "" {
		s.Cluster = lanCluster
	}
	if s.Groups == nil {
		s.Groups = []string{"{subject: telemetry.>, queue: up}"}
	}
	if s.HeartbeatInterval == 0 {
		s.HeartbeatInterval = 100 * time.Millisecond
	}
	if s.FailureTimeout == 0 {
		s.FailureTimeout = time.Second
	}
	return s
}

func (s lanSpec) yaml(listen string) string {
	var b strings.Builder
	if len(s.Groups) > 0 {
		b.WriteString("groups:\n")
		for _, g := range s.Groups {
			fmt.Fprintf(&b, "  - %s\n", g)
		}
	}
	fmt.Fprintf(&b, "cluster:\n  name: %s\n  secret: %q\n  priority: %d\n  listen: %s\n  interface: %s\n  mdns: true\n"+
		"  heartbeat_interval: %v\n  failure_timeout: %v\n",
		s.Cluster, s.Secret, s.Priority, listen, lanIf, s.HeartbeatInterval, s.FailureTimeout)
	b.WriteString(s.YAML)
	return b.String()
}

// lanNode is an edgeq node in a LAN namespace: the e2e node (start, kill,
// stop, logs shown when the test fails) run there.
type lanNode struct {
	*node
	lan  *lan
	slot int
	id   string
	spec lanSpec
}

// newNode prepares a node for slot i; start runs it.
func (l *lan) newNode(i int, spec lanSpec) *lanNode {
	l.t.Helper()
	if spec.ID == "" {
		l.t.Fatal("lanSpec.ID is required")
	}
	spec = spec.withDefaults()
	var n *node
	// Registered before newNode's cleanup, so it runs after the node is
	// gone: a race-built node (EDGEQ_E2E_RACE=1) reports races on stderr.
	l.t.Cleanup(func() {
		if log := n.logs(); strings.Contains(log, "WARNING: DATA RACE") {
			_, race, _ := strings.Cut(log, "WARNING: DATA RACE")
			l.t.Errorf("%s: data race in the node:\nWARNING: DATA RACE%s", spec.ID, race[:min(len(race), 16<<10)])
		}
	})
	n = newNode(l.t, spec.yaml(net.JoinHostPort(l.addr(i), strconv.Itoa(lanPeerPort))))
	n.nodeID, n.natsPort, n.httpPort, n.netns = spec.ID, lanNATSPort, lanHTTPPort, l.ns(i)
	tr := &http.Transport{DialContext: nsDialer{ns: l.ns(i)}.DialContext, DisableKeepAlives: true}
	n.client = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	l.t.Cleanup(tr.CloseIdleConnections)
	return &lanNode{node: n, lan: l, slot: i, id: spec.ID, spec: spec}
}

// startNodes starts one node per spec, spec i in slot i, one after the
// other (each waits for /readyz).
func (l *lan) startNodes(specs ...lanSpec) []*lanNode {
	l.t.Helper()
	out := make([]*lanNode, len(specs))
	for i, s := range specs {
		out[i] = l.newNode(i, s)
		out[i].start()
	}
	return out
}

// restart starts a node that was killed or stopped again: same data
// directory, same node ID, same configuration.
func (n *lanNode) restart() {
	n.t.Helper()
	if n.running() {
		n.t.Fatalf("%s: restart of a running node", n.id)
	}
	n.logMu.Lock()
	fmt.Fprintf(&n.log, "--- harness: %s restarted at %s ---\n", n.id, time.Now().Format(time.RFC3339Nano))
	n.logMu.Unlock()
	n.start()
}

// freeze stops the node with SIGSTOP: its sockets stay open and silent, as
// a hung gateway's would. kill ends it then.
func (n *lanNode) freeze() {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		n.t.Fatalf("%s: SIGSTOP: %v", n.id, err)
	}
}

// addr is the node's LAN address.
func (n *lanNode) addr() string { return n.lan.addr(n.slot) }

// nats connects to the node inside its namespace (reconnects too) and
// closes the connection at cleanup.
func (n *lanNode) nats(opts ...nats.Option) *nats.Conn {
	n.t.Helper()
	opts = append([]nats.Option{nats.Name("e2e-lan"), nats.SetCustomDialer(nsDialer{ns: n.netns, timeout: 2 * time.Second})}, opts...)
	nc, err := nats.Connect(n.url(), opts...)
	if err != nil {
		n.t.Fatalf("%s: nats connect: %v", n.id, err)
	}
	n.t.Cleanup(nc.Close)
	return nc
}

// status fetches the node's /v1/status.
func (n *lanNode) status() (lanStatus, error) {
	var st lanStatus
	resp, err := n.client.Get(n.httpURL() + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: /v1/status: %s: %s", n.id, resp.Status, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("%s: /v1/status: %w", n.id, err)
	}
	if st.Cluster == nil {
		return st, fmt.Errorf("%s: /v1/status has no cluster part", n.id)
	}
	return st, nil
}

// lanStatus is the part of /v1/status the cluster tests read.
type lanStatus struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Groups  []struct {
		Filter        string         `json:"filter"`
		Queue         string         `json:"queue"`
		Members       int            `json:"members"` // cluster-wide
		MembersByNode map[string]int `json:"members_by_node"`
		Leading       bool           `json:"leading"`
		Forwards      uint64         `json:"forwards"`
	} `json:"groups"`
	Cluster *struct {
		Peers []struct {
			Node     string `json:"Node"`
			Addr     string `json:"Addr"`
			Priority int    `json:"Priority"`
		} `json:"peers"`
		Leaders  map[string]lanLeader `json:"leaders"`
		Refused  uint64               `json:"refused_peers"`
		Election struct {
			HandOvers uint64 `json:"hand_overs"`
			TakeOvers uint64 `json:"take_overs"`
			Deposed   uint64 `json:"deposed"`
		} `json:"election"`
	} `json:"cluster"`
}

type lanLeader struct {
	Leader string `json:"leader"`
	Epoch  string `json:"epoch"`
	Self   bool   `json:"self"`
}

// peers returns the connected peers' node IDs, sorted.
func (s lanStatus) peers() []string {
	var out []string
	if s.Cluster != nil {
		for _, p := range s.Cluster.Peers {
			out = append(out, p.Node)
		}
	}
	slices.Sort(out)
	return out
}

// leader returns the node's view of group's leader ("" for none).
func (s lanStatus) leader(group string) lanLeader {
	if s.Cluster == nil {
		return lanLeader{}
	}
	return s.Cluster.Leaders[group]
}

// members returns the member count of group on the node.
func (s lanStatus) members(group string) int {
	for _, g := range s.Groups {
		if g.Filter+" "+g.Queue == group {
			return g.Members
		}
	}
	return 0
}

func (s lanStatus) String() string {
	if s.Cluster == nil {
		return s.Node + ": no cluster status"
	}
	ls := make([]string, 0, len(s.Cluster.Leaders))
	for g, l := range s.Cluster.Leaders {
		ls = append(ls, fmt.Sprintf("%q→%s(epoch %s, self %v)", g, l.Leader, l.Epoch, l.Self))
	}
	slices.Sort(ls)
	return fmt.Sprintf("%s: peers %v, leaders %v, refused %d", s.Node, s.peers(), ls, s.Cluster.Refused)
}

// agreedLeader returns group's leader when every status names the same one
// and exactly that node, among them, reports itself as the leader.
func agreedLeader(sts []lanStatus, group string) (string, bool) {
	if len(sts) == 0 {
		return "", false
	}
	want := sts[0].leader(group).Leader
	selves := 0
	for _, s := range sts {
		l := s.leader(group)
		if l.Leader == "" || l.Leader != want || l.Self != (s.Node == want) {
			return "", false
		}
		if l.Self {
			selves++
		}
	}
	return want, selves == 1
}

// waitNodes polls the nodes' statuses every 50ms until cond holds for them
// (all fetched without error), and returns how long that took and the
// statuses. On timeout it fails the test with the last statuses seen.
func waitNodes(t testing.TB, what string, timeout time.Duration, nodes []*lanNode, cond func([]lanStatus) bool) (time.Duration, []lanStatus) {
	t.Helper()
	start := time.Now()
	sts := make([]lanStatus, len(nodes))
	errs := make([]error, len(nodes))
	for {
		ok := true
		for i, n := range nodes {
			sts[i], errs[i] = n.status()
			ok = ok && errs[i] == nil
		}
		if ok && cond(sts) {
			return time.Since(start), sts
		}
		if time.Since(start) > timeout {
			var b strings.Builder
			for i, n := range nodes {
				if errs[i] != nil {
					fmt.Fprintf(&b, "\n  %s: %v", n.id, errs[i])
				} else {
					fmt.Fprintf(&b, "\n  %s", sts[i])
				}
			}
			t.Fatalf("timed out after %v waiting for %s; last statuses:%s", timeout, what, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ids returns the node IDs of nodes.
func ids(nodes ...*lanNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.id
	}
	return out
}

// others returns nodes without skip.
func others(nodes []*lanNode, skip ...*lanNode) []*lanNode {
	return slices.DeleteFunc(slices.Clone(nodes), func(n *lanNode) bool { return slices.Contains(skip, n) })
}

// peersAre reports whether every status lists exactly the other nodes of
// nodes as its peers.
func peersAre(sts []lanStatus, nodes []*lanNode) bool {
	for i, s := range sts {
		want := ids(others(nodes, nodes[i])...)
		slices.Sort(want)
		if !slices.Equal(s.peers(), want) {
			return false
		}
	}
	return true
}
