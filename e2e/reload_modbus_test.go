package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// seqCollector is a worker that acks everything and keeps, per device, the
// sequence numbers it got and the payloads (polls may repeat a payload, so
// records are told apart by their sequence number).
type seqCollector struct {
	mu       sync.Mutex
	seqs     map[string][]uint64
	payloads []string
}

func collectSeqs(t *testing.T, url string) *seqCollector {
	t.Helper()
	c := &seqCollector{seqs: map[string][]uint64{}}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
		seq, _ := strconv.ParseUint(m.Header.Get("Edgeq-Seq"), 10, 64)
		c.mu.Lock()
		d := m.Header.Get("Edgeq-Device")
		c.seqs[d] = append(c.seqs[d], seq)
		c.payloads = append(c.payloads, string(m.Data))
		c.mu.Unlock()
		_ = m.Ack()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// count is how many records of device arrived.
func (c *seqCollector) count(device string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs[device])
}

func (c *seqCollector) anyPayload(sub string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.payloads {
		if strings.Contains(p, sub) {
			return true
		}
	}
	return false
}

// check reports a device whose records did not arrive as 1, 2, 3, ...:
// one lost, duplicated or out of order.
func (c *seqCollector) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, s := range c.seqs {
		for i, q := range s {
			if q != uint64(i+1) {
				t.Errorf("device %s: record %d has seq %d: %v", d, i+1, q, s)
				break
			}
		}
	}
}

// startModbusSlave runs bridge/modbus/testdata/slave.py (pymodbus) with args
// and returns the TCP port it serves (0 for RTU).
func startModbusSlave(t *testing.T, args ...string) int {
	t.Helper()
	const python = "/usr/bin/python3" // Debian's, where python3-pymodbus is
	if err := exec.Command(python, "-c", "import pymodbus").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pymodbus missing and CI=true: install python3-pymodbus (%v)", err)
		}
		t.Skipf("pymodbus missing: %v", err)
	}
	slave := exec.Command(python, append([]string{"../bridge/modbus/testdata/slave.py"}, args...)...)
	out, err := slave.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := slave.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Process.Kill(); _ = slave.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("modbus slave did not start")
	}
	var port int
	if _, err := fmt.Sscanf(sc.Text(), "READY %d", &port); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return port
}

// rtuLine is an RS-485 line on a pair of pseudo-terminals joined by socat:
// the node opens edge, a pymodbus RTU slave serves slave.
func rtuLine(t *testing.T) (edge, slave string) {
	t.Helper()
	socat := requireTool(t, "socat")
	dir := t.TempDir()
	edge, slave = filepath.Join(dir, "ttyUSB-rs485"), filepath.Join(dir, "slave")
	cmd := exec.Command(socat, "pty,raw,echo=0,link="+edge, "pty,raw,echo=0,link="+slave)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "socat's pseudo-terminals", 10*time.Second, func() bool {
		_, e1 := os.Stat(edge)
		_, e2 := os.Stat(slave)
		return e1 == nil && e2 == nil
	})
	return edge, slave
}

type modbusStatus struct {
	Modbus []struct {
		Name    string `json:"name"`
		Open    bool   `json:"open"`
		Devices []struct {
			Device string `json:"device"`
			Polls  uint64 `json:"polls"`
		} `json:"devices"`
	} `json:"modbus"`
}

// modbusPolls returns each listed bus's polls (of its first device); a
// bus listed twice counts as "<name>#2".
func modbusPolls(n *node) map[string]uint64 {
	var st modbusStatus
	if !readStatus(n, &st) {
		return nil
	}
	out := map[string]uint64{}
	for _, b := range st.Modbus {
		name := b.Name
		if _, dup := out[name]; dup {
			name += "#2"
		}
		if b.Open && len(b.Devices) > 0 {
			out[name] = b.Devices[0].Polls
		} else {
			out[name] = 0
		}
	}
	return out
}

// TestSIGHUPReloadsModbusBuses: with three buses polling (two on a pymodbus
// TCP slave, one on an RS-485 line of pseudo-terminals to a pymodbus RTU
// slave), SIGHUP removes one, changes one (another register: it restarts)
// and adds one (RTU). The unchanged bus polls on untouched (never reopened,
// its poll count not reset, listed once); the removed one stops; the
// changed and added ones poll with their new settings; every record stored
// reaches the worker once, in order.
func TestSIGHUPReloadsModbusBuses(t *testing.T) {
	port := startModbusSlave(t, "tcp", "1", "2")
	edge, slavePath := rtuLine(t)
	startModbusSlave(t, "rtu", slavePath, "19200", "3")
	tcpBus := func(name string, unit int, regs string) string {
		return fmt.Sprintf("  - {name: %s, tcp: {address: '127.0.0.1:%d'}, devices: [{unit: %d, device: %s-dev, interval: 100ms, registers: [%s]}]}\n",
			name, port, unit, name, regs)
	}
	counter := "{name: counter, function: holding, address: 0, type: uint16}"
	unitID := "{name: unit_id, function: holding, address: 17, type: uint16}"
	rtuBus := fmt.Sprintf("  - {name: added, rtu: {path: %s, baud: 19200}, devices: [{unit: 3, device: added-dev, interval: 100ms, registers: [%s, %s]}]}\n",
		edge, counter, unitID)
	groups := "groups:\n  - {subject: telemetry.>, queue: workers}\n"
	first := groups + "modbus:\n" + tcpBus("keep", 1, counter) + tcpBus("chg", 2, counter) + tcpBus("gone", 1, counter)
	second := groups + "modbus:\n" + tcpBus("keep", 1, counter) + tcpBus("chg", 2, counter+", "+unitID) + rtuBus
	n := newNode(t, first)
	n.start()
	w := collectSeqs(t, n.url())
	waitFor(t, "the three buses polling", 30*time.Second, func() bool {
		return w.count("keep-dev") >= 5 && w.count("chg-dev") >= 5 && w.count("gone-dev") >= 5
	})
	before := modbusPolls(n)["keep"]

	if err := os.WriteFile(n.config, []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 30*time.Second, func() bool { return strings.Contains(n.logs(), "configuration reloaded") })
	logs := n.logs()
	for _, want := range []string{"modbus[chg]", "modbus[gone]", "modbus[added]"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the reload does not name %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "modbus[keep]") {
		t.Fatalf("the reload restarted the unchanged bus:\n%s", logs)
	}
	waitFor(t, "the changed and added buses polling with their new settings", 60*time.Second, func() bool {
		return w.anyPayload(`"unit_id":2`) && w.anyPayload(`"unit_id":3`)
	})
	var polls map[string]uint64
	waitFor(t, "the buses listed after the reload", 30*time.Second, func() bool {
		polls = modbusPolls(n)
		return len(polls) == 3 && polls["keep"] > 0 && polls["chg"] > 0 && polls["added"] > 0
	})
	if polls["keep"] < before {
		t.Errorf("the unchanged bus's polls went from %d to %d: it was restarted", before, polls["keep"])
	}
	// The removed bus was stopped: while the kept one polls 20 more times,
	// nothing more of it arrives.
	keepAt := w.count("keep-dev")
	waitFor(t, "the kept bus polling on", 30*time.Second, func() bool { return w.count("keep-dev") >= keepAt+10 })
	goneAt := w.count("gone-dev")
	waitFor(t, "the kept bus polling on", 30*time.Second, func() bool { return w.count("keep-dev") >= keepAt+30 })
	if got := w.count("gone-dev"); got != goneAt {
		t.Errorf("the removed bus: %d more records after the reload", got-goneAt)
	}
	logs = n.logs()
	for bus, want := range map[string]int{"keep": 1, "chg": 2, "gone": 1, "added": 1} {
		if got := strings.Count(logs, `msg="modbus bus open" node=e2e-node component=modbus bus=`+bus+" "); got != want {
			t.Errorf("bus %s opened %d times, want %d", bus, got, want)
		}
	}
	// Every stored record delivered once, in order.
	w.check(t)
}
