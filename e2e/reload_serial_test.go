package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// sensorPTY is a sensor on a pseudo-terminal: the test writes to master,
// the node opens link.
type sensorPTY struct {
	master *os.File
	tty    string // the device the node resolves link to
	link   string
}

func newSensorPTY(t *testing.T, name string) *sensorPTY {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	link := filepath.Join(t.TempDir(), "ttyUSB-"+name)
	if err := os.Symlink(tty.Name(), link); err != nil {
		t.Fatal(err)
	}
	return &sensorPTY{master: master, tty: tty.Name(), link: link}
}

// opens counts the node's log lines saying it opened this port.
func (s *sensorPTY) opens(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `msg="serial port `) && (strings.Contains(l, " device="+s.tty+" ") || strings.HasSuffix(l, " device="+s.tty)) {
			n++
		}
	}
	return n
}

// stream writes line frames "<device>,tag=<device>-<i>" every few ms until
// the returned function is called (or the test ends); that function returns
// how many it wrote.
func (s *sensorPTY) stream(t *testing.T, device string) func() int {
	var wg sync.WaitGroup
	var once sync.Once
	stop := make(chan struct{})
	n := 0
	end := func() int {
		once.Do(func() { close(stop) })
		wg.Wait()
		return n
	}
	t.Cleanup(func() { end() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := fmt.Fprintf(s.master, "%s,tag=%s-%d\n", device, device, n+1); err != nil {
				t.Errorf("write %s: %v", device, err)
				return
			}
			n++
			time.Sleep(5 * time.Millisecond) // a sensor's pace, not an ordering
		}
	}()
	return end
}

// TestSIGHUPReloadsSerialPorts: while sensors write to three serial ports,
// SIGHUP removes one, changes one (new headers: it restarts on the same
// pseudo-terminal) and adds one; the unchanged port stays open (never
// reopened) and every frame of it and of the changed one arrives exactly
// once; the added one is read; the removed one is not.
func TestSIGHUPReloadsSerialPorts(t *testing.T) {
	keep, chg, gone, added := newSensorPTY(t, "keep"), newSensorPTY(t, "chg"), newSensorPTY(t, "gone"), newSensorPTY(t, "added")
	port := func(name, path, extra string) string {
		return fmt.Sprintf("  - {name: %s, path: %s, format: line%s}\n", name, path, extra)
	}
	first := "serial:\n" + port("keep", keep.link, "") + port("chg", chg.link, ", headers: {Site: one}") + port("gone", gone.link, "")
	second := "serial:\n" + port("keep", keep.link, "") + port("chg", chg.link, ", headers: {Site: two}") + port("added", added.link, "")
	n := newNode(t, first)
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	for _, name := range []string{"keep", "chg", "gone"} {
		waitSerialOpen(t, n, name)
	}
	fmt.Fprintf(gone.master, "gone,tag=gone-1\n")
	keepN, chgN := keep.stream(t, "keep"), chg.stream(t, "chg")
	waitFor(t, "frames of every port before the reload", 30*time.Second, func() bool {
		return tr.lastOf("keep") >= 20 && tr.lastOf("chg") >= 20 && tr.lastOf("gone") == 1
	})

	if err := os.WriteFile(n.config, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 30*time.Second, func() bool { return strings.Contains(n.logs(), "configuration reloaded") })
	logs := n.logs()
	for _, want := range []string{"serial[chg]", "serial[gone]", "serial[added]"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the reload does not name %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "serial[keep]") {
		t.Fatalf("the reload restarted the unchanged port:\n%s", logs)
	}
	waitSerialOpen(t, n, "added")
	fmt.Fprintf(gone.master, "gone,tag=gone-2\n")
	fmt.Fprintf(added.master, "added,tag=added-1\n")
	before := tr.lastOf("keep")
	waitFor(t, "frames after the reload", 30*time.Second, func() bool {
		return tr.lastOf("added") == 1 && tr.lastOf("keep") >= before+20 && tr.lastOf("chg") >= 20
	})
	nk, nc := keepN(), chgN()
	waitFor(t, "every frame of keep and chg", 60*time.Second, func() bool {
		return tr.lastOf("keep") == uint64(nk) && tr.lastOf("chg") == uint64(nc)
	})
	tr.mu.Lock()
	for p, c := range tr.seen {
		if c != 1 {
			t.Errorf("%s delivered %d times", p, c)
		}
	}
	if len(tr.seen) != nk+nc+2 {
		t.Errorf("%d distinct frames, want %d of keep, %d of chg, gone-1 and added-1", len(tr.seen), nk, nc)
	}
	for p := range tr.seen {
		if strings.Contains(p, "gone-2") {
			t.Error("the removed port was still read")
		}
	}
	tr.mu.Unlock()
	logs = n.logs()
	for _, c := range []struct {
		s    *sensorPTY
		want int
	}{{keep, 1}, {chg, 2}, {gone, 1}, {added, 1}} {
		if got := c.s.opens(logs); got != c.want {
			t.Errorf("%s opened %d times, want %d", c.s.link, got, c.want)
		}
	}
}
