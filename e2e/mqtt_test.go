package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startMosquitto runs a private mosquitto on a free loopback port.
func startMosquitto(t *testing.T) int {
	t.Helper()
	port, _ := startMosquittoCmd(t)
	return port
}

// startMosquittoCmd is startMosquitto that also returns the process, for a
// test that stops the broker itself.
func startMosquittoCmd(t *testing.T) (int, *exec.Cmd) {
	t.Helper()
	bin := requireTool(t, "mosquitto", "/usr/sbin/mosquitto")
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\nmax_queued_messages 0\n", port, dir)), 0o600)
	cmd := exec.Command(bin, "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "mosquitto listening", 10*time.Second, func() bool {
		out, err := runCmd("mosquitto_pub", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-t", "ping", "-m", "x")
		return err == nil && !strings.Contains(out, "Error")
	})
	return port, cmd
}

// plantBridge is the config of an MQTT bridge "plant" on the mosquitto at
// port: QoS 1, devices from sensors/{device}/data.
func plantBridge(port int) string {
	return fmt.Sprintf(`mqtt:
  - name: plant
    broker: tcp://127.0.0.1:%d
    topics: ["sensors/+/data"]
    qos: 1
    device: {topic: "sensors/{device}/data"}
`, port)
}

// TestMQTTToWorker: sensors publish QoS 1 to mosquitto; the node's bridge
// stores them and a NATS worker receives them in order per device.
func TestMQTTToWorker(t *testing.T) {
	requireTool(t, "mosquitto_pub")
	port := startMosquitto(t)
	n := newNode(t, plantBridge(port))
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	waitFor(t, "bridge connected", 15*time.Second, func() bool {
		st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		return strings.Contains(st, `"subscribed": true`)
	})
	for d := 0; d < 3; d++ {
		args := []string{"-h", "127.0.0.1", "-p", fmt.Sprint(port), "-q", "1", "-t", fmt.Sprintf("sensors/m%d/data", d), "-l"}
		cmd := exec.Command("mosquitto_pub", args...)
		var lines strings.Builder
		for i := 1; i <= 50; i++ {
			fmt.Fprintf(&lines, "m%d|%d\n", d, i)
		}
		cmd.Stdin = strings.NewReader(lines.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub: %v %s", err, out)
		}
	}
	// An unmappable topic is acked and counted, not stored.
	runCmd("mosquitto_pub", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-q", "1", "-t", "sensors/bad device/data", "-m", "x")
	waitFor(t, "mqtt messages delivered", 30*time.Second, func() bool { return tr.distinct() == 150 })
	for d := 0; d < 3; d++ {
		if got := tr.lastOf(fmt.Sprintf("m%d", d)); got != 50 {
			t.Fatalf("device m%d: last seq %d", d, got)
		}
	}
}
