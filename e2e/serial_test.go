package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestSerialToWorker: a sensor on a pseudo-terminal writes line-format frames;
// a NATS worker receives them from the node, in order.
func TestSerialToWorker(t *testing.T) {
	sensor, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	defer sensor.Close()
	defer tty.Close()
	link := filepath.Join(t.TempDir(), "ttyUSB-sensor")
	if err := os.Symlink(tty.Name(), link); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, fmt.Sprintf("serial:\n  - name: bench1\n    path: %s\n    format: line\n", link))
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	waitSerialOpen(t, n, "bench1") // the port opens on its own schedule
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(sensor, "probe-%d,temp=%d.5,ok=true\n", i%2, i)
		if i == 10 {
			sensor.Write([]byte("garbage without fields\xff\n"))
		}
	}
	waitFor(t, "serial frames delivered", 30*time.Second, func() bool { return tr.distinct() == 20 })
	if tr.lastOf("probe-0") != 10 || tr.lastOf("probe-1") != 10 {
		t.Fatalf("per-device sequences: probe-0 %d, probe-1 %d", tr.lastOf("probe-0"), tr.lastOf("probe-1"))
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.seen[`{"temp":20.5,"ok":"true"}`] == 0 && tr.seen[`{"temp":20.5,"ok":true}`] == 0 {
		t.Fatalf("line frame not converted to JSON: %v", tr.seen)
	}
}
