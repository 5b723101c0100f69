package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// avahi-daemon (0.8, as on Raspberry Pi OS) inside LAN namespaces, next to
// edgeq nodes. Each daemon has its own D-Bus system bus (a dbus-daemon on a
// socket in a temporary directory; avahi's tools find it through
// DBUS_SYSTEM_BUS_ADDRESS) and its own /run (a tmpfs in the mount namespace
// ip netns exec makes), so that several daemons run at once and none sees,
// or is seen by, an avahi-daemon of the host or of another test (avahi
// refuses to start when /run/avahi-daemon/pid names a live daemon).

// avahiDaemon is one avahi-daemon in slot's namespace.
type avahiDaemon struct {
	lan  *lan
	slot int
	env  []string // for avahi's tools
}

func requireAvahi(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"avahi-daemon", "avahi-browse", "dbus-daemon"} {
		requireTool(t, tool) // apt-get install avahi-daemon avahi-utils dbus
	}
}

// startAvahi runs dbus-daemon and avahi-daemon for slot i and waits until
// avahi has started; both stop at cleanup.
func (l *lan) startAvahi(i int) *avahiDaemon {
	l.t.Helper()
	dir := l.t.TempDir()
	bus := "unix:path=" + filepath.Join(dir, "bus")
	lanWriteFile(l.t, filepath.Join(dir, "bus.conf"), `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>`+bus+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`)
	lanWriteFile(l.t, filepath.Join(dir, "avahi.conf"), fmt.Sprintf(`[server]
host-name=eqlan-avahi-%d-%d
use-ipv4=yes
use-ipv6=no
allow-interfaces=%s
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
`, os.Getpid(), i, lanIf))
	a := &avahiDaemon{lan: l, slot: i, env: []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus}}
	dbus := exec.Command("dbus-daemon", "--config-file="+filepath.Join(dir, "bus.conf"), "--nofork", "--nopidfile")
	dbus.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	startProc(l.t, fmt.Sprintf("dbus-daemon %d", i), dbus)
	waitFor(l.t, "the dbus socket", 5*time.Second, func() bool { _, err := os.Stat(filepath.Join(dir, "bus")); return err == nil })
	daemon := l.command(i, a.env, "sh", "-c", "mount -t tmpfs -o mode=0755 eqlan-run /run && mkdir /run/avahi-daemon && "+
		"exec avahi-daemon -f "+filepath.Join(dir, "avahi.conf")+" --no-drop-root --no-chroot --no-rlimits --no-proc-title")
	p := startProc(l.t, fmt.Sprintf("avahi-daemon %d", i), daemon)
	p.waitLine("Server startup complete", 10*time.Second)
	return a
}

// browse runs avahi-browse -rpt service (resolve, parsable, dump the cache
// and exit) against this daemon and returns the resolved entries.
func (a *avahiDaemon) browse(service string) ([]avahiEntry, string) {
	a.lan.t.Helper()
	out, err := a.lan.run(a.slot, a.env, 20*time.Second, "avahi-browse", "-rpt", service)
	if err != nil {
		a.lan.t.Fatalf("avahi-browse -rpt %s in slot %d: %v\n%s", service, a.slot, err, out)
	}
	var es []avahiEntry
	for _, line := range strings.Split(out, "\n") {
		if e, ok := parseAvahiLine(line); ok && e.Event == "=" {
			es = append(es, e)
		}
	}
	return es, out
}

// browser starts a running avahi-browse -rp service against this daemon.
func (a *avahiDaemon) browser(service string) *lanProc {
	a.lan.t.Helper()
	return startProc(a.lan.t, fmt.Sprintf("avahi-browse -rp in slot %d", a.slot),
		a.lan.command(a.slot, a.env, "avahi-browse", "-rp", service))
}

// avahiEntry is one line of avahi-browse -p: "+" new, "-" removed, "="
// resolved (with host, address, port, TXT).
type avahiEntry struct {
	Event, Iface, Proto, Name, Type, Domain string
	Host, Addr                              string
	Port                                    int
	TXT                                     []string
}

func parseAvahiLine(line string) (avahiEntry, bool) {
	f := strings.SplitN(line, ";", 10)
	if len(f) < 6 || len(f[0]) != 1 || !strings.Contains("+-=", f[0]) {
		return avahiEntry{}, false
	}
	e := avahiEntry{Event: f[0], Iface: f[1], Proto: f[2], Name: f[3], Type: f[4], Domain: f[5]}
	if e.Event == "=" {
		if len(f) < 10 {
			return avahiEntry{}, false
		}
		e.Host, e.Addr = f[6], f[7]
		e.Port, _ = strconv.Atoi(f[8])
		// TXT: "k=v" "k=v" (avahi escapes quotes and semicolons inside).
		for _, s := range strings.Split(f[9], `" "`) {
			if s = strings.Trim(s, `"`); s != "" {
				e.TXT = append(e.TXT, s)
			}
		}
	}
	return e, true
}

// txt returns the value of key in e's TXT.
func (e avahiEntry) txt(key string) (string, bool) {
	for _, kv := range e.TXT {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func findEntry(es []avahiEntry, name string) (avahiEntry, bool) {
	i := slices.IndexFunc(es, func(e avahiEntry) bool { return e.Name == name })
	if i < 0 {
		return avahiEntry{}, false
	}
	return es[i], true
}

// lanProc is a helper process (a daemon, a running browser) whose output
// is kept by line and logged when the test fails.
type lanProc struct {
	t     testing.TB
	name  string
	mu    sync.Mutex
	lines []string
	stamp []time.Time // when each line was read
}

// startProc starts cmd and stops it at cleanup (SIGTERM, then SIGKILL
// after 3 s; by pid, our own child).
func startProc(t testing.TB, name string, cmd *exec.Cmd) *lanProc {
	t.Helper()
	p := &lanProc{t: t, name: name}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	w.Close()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			if len(p.lines) < 100000 {
				p.lines = append(p.lines, sc.Text())
				p.stamp = append(p.stamp, time.Now())
			}
			p.mu.Unlock()
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		<-readDone
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- %s output ---\n%s", name, strings.Join(p.lines, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// firstLine returns when the first line containing s was read.
func (p *lanProc) firstLine(s string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, l := range p.lines {
		if strings.Contains(l, s) {
			return p.stamp[i], true
		}
	}
	return time.Time{}, false
}

// waitLine waits for a line containing s and returns when it was read.
func (p *lanProc) waitLine(s string, within time.Duration) time.Time {
	p.t.Helper()
	var at time.Time
	waitFor(p.t, p.name+" to print "+s, within, func() bool {
		var ok bool
		at, ok = p.firstLine(s)
		return ok
	})
	return at
}

func lanWriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLANAvahiInterop: edgeq nodes with avahi-daemon running next to them,
// as on Raspberry Pi OS. Slots 0 and 1 each run an avahi-daemon and a node
// (gw-a, gw-b); slot 2 runs a node alone (gw-c).
//   - A running avahi-browse -rp in slots 0 and 1 lists each node within
//     2 s of its start (announcements), and drops gw-c within 5 s of its
//     SIGTERM (goodbye).
//   - avahi-browse -rpt from another namespace, with its own avahi,
//     resolves a node's address, port and TXT (id, cluster, priority,
//     version, peer port); so does avahi on a node's own host for the other
//     nodes, although the node's responder, passive listener and browse
//     rounds share port 5353 with it.
//   - That holds over two record TTLs (10 s each), which covers a browse
//     round of every node (hashicorp's Query binds 0.0.0.0:5353 for 1 s in
//     10 s) and avahi's cache refreshes: one-shot browses on both avahi
//     hosts stay complete and the running browsers drop no running node.
//   - The nodes still find each other and elect one leader.
func TestLANAvahiInterop(t *testing.T) {
	requireAvahi(t)
	l := newLAN(t, 3)
	av := []*avahiDaemon{l.startAvahi(0), l.startAvahi(1)}
	live := []*lanProc{av[0].browser("_edgeq._tcp"), av[1].browser("_edgeq._tcp")}
	time.Sleep(500 * time.Millisecond) // the browsers register with their daemons

	const appearBound, goneBound = 2 * time.Second, 5 * time.Second
	nodes := make([]*lanNode, 0, 3)
	firstStart := time.Now()
	for i, s := range lanTrio() {
		n := l.newNode(i, s)
		startAt := time.Now()
		n.start()
		nodes = append(nodes, n)
		for j, p := range live {
			at := p.waitLine(fmt.Sprintf("=;%s;IPv4;%s;_edgeq._tcp;local;", lanIf, n.id), appearBound-time.Since(startAt))
			t.Logf("running avahi-browse in slot %d resolved %s %v after its start", j, n.id, at.Sub(startAt))
		}
	}

	lanFormed(t, nodes, "gw-c", 30*time.Second)
	st, err := nodes[0].status()
	if err != nil {
		t.Fatal(err)
	}

	// resolved checks one avahi-browse -rpt on a: every node resolved with
	// its host, address, port and TXT. It returns false (and reports) when
	// one is missing or wrong.
	resolved := func(a *avahiDaemon) bool {
		t.Helper()
		es, out := a.browse("_edgeq._tcp")
		ok := true
		for _, n := range nodes {
			e, found := findEntry(es, n.id)
			if !found {
				t.Errorf("%.1fs: avahi-browse -rpt in slot %d (next to %s) did not resolve %s:\n%s",
					time.Since(firstStart).Seconds(), a.slot, nodes[a.slot].id, n.id, out)
				ok = false
				continue
			}
			want := map[string]string{"id": n.id, "cluster": lanCluster, "priority": strconv.Itoa(n.spec.Priority),
				"port": strconv.Itoa(lanPeerPort), "version": st.Version}
			for k, v := range want {
				if got, _ := e.txt(k); got != v {
					t.Errorf("slot %d: %s TXT %s=%q, want %q (%v)", a.slot, n.id, k, got, v, e.TXT)
					ok = false
				}
			}
			if e.Addr != n.addr() || e.Port != lanPeerPort || e.Host != n.id+".local" {
				t.Errorf("slot %d: %s resolved to %s %s:%d, want %s.local %s:%d", a.slot, n.id, e.Host, e.Addr, e.Port, n.id, n.addr(), lanPeerPort)
				ok = false
			}
		}
		return ok
	}
	runs := 0
	for time.Since(firstStart) < 2*10*time.Second+time.Second {
		for _, a := range av {
			runs++
			if !resolved(a) {
				t.FailNow()
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%d one-shot avahi-browse -rpt on the two avahi hosts over %v: all resolved every node", runs, time.Since(firstStart).Round(time.Second))
	for j, p := range live {
		for _, n := range nodes {
			if _, gone := p.firstLine(fmt.Sprintf("-;%s;IPv4;%s;", lanIf, n.id)); gone {
				t.Errorf("running avahi-browse in slot %d dropped %s, which runs", j, n.id)
			}
		}
	}
	waitNodes(t, "the cluster unchanged", 5*time.Second, nodes, func(sts []lanStatus) bool {
		l, ok := agreedLeader(sts, lanGroup)
		return ok && l == "gw-c" && peersAre(sts, nodes)
	})

	// A clean stop says goodbye: the running browsers drop gw-c.
	c := nodes[2]
	stopAt := time.Now()
	if code := c.stop(); code != 0 {
		t.Errorf("gw-c exit code %d after SIGTERM", code)
	}
	for j, p := range live {
		at := p.waitLine(fmt.Sprintf("-;%s;IPv4;gw-c;_edgeq._tcp;local", lanIf), goneBound-time.Since(stopAt))
		t.Logf("running avahi-browse in slot %d dropped gw-c %v after its SIGTERM", j, at.Sub(stopAt))
	}
	for j, p := range live {
		for _, n := range nodes[:2] {
			if _, gone := p.firstLine(fmt.Sprintf("-;%s;IPv4;%s;", lanIf, n.id)); gone {
				t.Errorf("running avahi-browse in slot %d dropped %s, which still runs", j, n.id)
			}
		}
	}
}
