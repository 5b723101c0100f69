package mdns

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAvahiInterop runs avahi-daemon 0.8 (the daemon of Raspberry Pi OS) in
// one namespace and an edgeq node in another, and checks with avahi's own
// tools that
//   - avahi-browse -rpt resolves the node: instance, host, address, port, TXT;
//   - avahi-resolve gives the host name's address;
//   - a running avahi-browse lists a node that starts within 5 s
//     (announcements), keeps it over two TTLs (its refresh queries are
//     answered) and drops it within 3 s of its stop (goodbye), where
//     hashicorp's server would take 11 s to 1 h and 120 s (GOTCHAS 2.3).
//
// avahi talks to its tools over D-Bus: the test runs a private dbus-daemon
// on a socket in a temporary directory. It skips when avahi-daemon,
// avahi-utils or dbus-daemon are not installed (apt-get install
// avahi-daemon avahi-utils), or when an avahi-daemon already runs here.
func TestAvahiInterop(t *testing.T) {
	for _, tool := range []string{"avahi-daemon", "avahi-browse", "avahi-resolve", "dbus-daemon"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install avahi-daemon avahi-utils)", tool)
		}
	}
	if exec.Command("avahi-daemon", "--check").Run() == nil {
		t.Skip("an avahi-daemon already runs on this host; the test needs its own")
	}
	l := newLAN(t, 2)
	dir := t.TempDir()
	bus := "unix:path=" + filepath.Join(dir, "bus")
	writeFile(t, filepath.Join(dir, "bus.conf"), `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
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
	writeFile(t, filepath.Join(dir, "avahi.conf"), `[server]
host-name=avahi-`+fmt.Sprint(os.Getpid())+`
use-ipv4=yes
use-ipv6=no
allow-interfaces=`+lanIfName+`
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
`)
	env := append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	dbus := startDaemon(t, "dbus-daemon", nil, "", "dbus-daemon", "--config-file="+filepath.Join(dir, "bus.conf"), "--nofork", "--nopidfile")
	waitFor(t, 5*time.Second, "the dbus socket", func() bool { _, err := os.Stat(filepath.Join(dir, "bus")); return err == nil })
	avahi := startDaemon(t, "avahi-daemon", env, "Server startup complete", "ip", "netns", "exec", l.nodes[0],
		"avahi-daemon", "-f", filepath.Join(dir, "avahi.conf"), "--no-drop-root", "--no-chroot", "--no-rlimits", "--no-proc-title")
	_ = dbus
	_ = avahi

	// A long-running browser, started before the node.
	live := startDaemon(t, "avahi-browse -rp", env, "", "ip", "netns", "exec", l.nodes[0], "avahi-browse", "-rp", "_edgeq._tcp")
	time.Sleep(500 * time.Millisecond)
	startAt := time.Now()
	node := l.spawn("gw-av", l.nodes[1], "node", "NODE_ID=gw-av", "NODE_CLUSTER=alpha", "NODE_PRIORITY=3", "NODE_PORT=7500", "BROWSE_INTERVAL=60s", "TTL="+avahiTTL.String())
	node.waitKey("READY", waitWindow)
	gone := fmt.Sprintf("-;%s;IPv4;gw-av;_edgeq._tcp;local", lanIfName)
	want := fmt.Sprintf(`=;%s;IPv4;gw-av;_edgeq._tcp;local;gw-av.local;%s;7500;`, lanIfName, l.addr(1))
	// By the node's announcements: soon, before the browser's own backed-off
	// queries would find it (so not waitFor's 30s floor; 2s was too tight
	// for a loaded machine).
	for deadline := time.Now().Add(5 * time.Second); !live.has(want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out after 5s waiting for the running avahi-browse to resolve gw-av")
		}
	}
	t.Logf("running avahi-browse resolved the node %v after its start", time.Since(startAt))

	// A one-shot browse.
	cmd := exec.Command("ip", "netns", "exec", l.nodes[0], "avahi-browse", "-rpt", "_edgeq._tcp")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("avahi-browse -rpt: %v\n%s", err, out)
	}
	t.Logf("avahi-browse -rpt _edgeq._tcp:\n%s", out)
	var resolved string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, want) {
			resolved = line
		}
	}
	if resolved == "" {
		t.Fatalf("avahi-browse -rpt did not resolve gw-av at %s:7500:\n%s", l.addr(1), out)
	}
	for _, kv := range []string{"txtvers=1", "id=gw-av", "cluster=alpha", "priority=3", "version=test-1", "port=7500"} {
		if !strings.Contains(resolved, `"`+kv+`"`) {
			t.Errorf("TXT %q missing in %s", kv, resolved)
		}
	}

	// Host name resolution.
	cmd = exec.Command("ip", "netns", "exec", l.nodes[0], "avahi-resolve", "-4", "-n", "gw-av.local")
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	if got := strings.Fields(string(out)); err != nil || len(got) != 2 || got[0] != "gw-av.local" || got[1] != l.addr(1) {
		t.Errorf("avahi-resolve -4 -n gw-av.local: %v: %q, want gw-av.local %s", err, out, l.addr(1))
	}

	// Cache maintenance: avahi re-queries at 80-95 % of the TTL and drops
	// the service unless the node answers. Two TTLs later it is still
	// listed. (With a 2 s TTL the node had 100-400 ms to answer, too
	// little on a loaded machine: avahi dropped it and listed it again.)
	time.Sleep(2*avahiTTL + 500*time.Millisecond)
	if live.has(gone) {
		t.Fatal("avahi-browse dropped the running node: its refresh queries were not answered")
	}

	// Goodbye.
	stopAt := time.Now()
	node.send("stop")
	node.waitKey("STOPPED", waitWindow)
	waitFor(t, 3*time.Second, "the running avahi-browse to drop gw-av", func() bool { return live.has(gone) })
	t.Logf("running avahi-browse dropped the node %v after its stop", time.Since(stopAt))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// avahiTTL is the node's record TTL in TestAvahiInterop.
const avahiTTL = 8 * time.Second

// waitFor polls cond; within only bounds a hang, and is never below 30s.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	within = max(within, 30*time.Second)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemon is a long-running helper process; its output is kept by line.
type daemon struct {
	mu    sync.Mutex
	lines []string
}

func (d *daemon) has(prefix string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// startDaemon starts argv, waits for a line containing ready (unless ""),
// and stops it with SIGTERM (then SIGKILL) at cleanup. Its output is logged
// when the test fails.
func startDaemon(t *testing.T, name string, env []string, ready string, argv ...string) *daemon {
	t.Helper()
	d := &daemon{}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	w.Close()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			d.mu.Unlock()
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // our own child, by pid
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		<-readDone
		if t.Failed() {
			d.mu.Lock()
			t.Logf("--- %s output ---\n%s", name, strings.Join(d.lines, "\n"))
			d.mu.Unlock()
		}
	})
	if ready != "" {
		waitFor(t, 10*time.Second, name+" to print "+ready, func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			for _, l := range d.lines {
				if strings.Contains(l, ready) {
					return true
				}
			}
			return false
		})
	}
	return d
}
