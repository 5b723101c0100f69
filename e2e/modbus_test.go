package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestModbusTCPToWorker: a real pymodbus TCP slave with two units; the node
// polls them (modbus: in its config) and a NATS worker receives one JSON
// record per poll, per device in order; /metrics and /v1/status count the
// polls and the exception of a register the slave does not have.
func TestModbusTCPToWorker(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's, where python3-pymodbus is
	if err := exec.Command(python, "-c", "import pymodbus").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pymodbus missing and CI=true: install python3-pymodbus (%v)", err)
		}
		t.Skipf("pymodbus missing: %v", err)
	}
	slave := exec.Command(python, "../bridge/modbus/testdata/slave.py", "tcp", "1", "2")
	out, err := slave.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := slave.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Process.Kill(); _ = slave.Wait() })
	sc := bufio.NewScanner(out)
	var port int
	if !sc.Scan() {
		t.Fatal("slave did not start")
	}
	if _, err := fmt.Sscanf(sc.Text(), "READY %d", &port); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	n := newNode(t, fmt.Sprintf(`modbus:
  - name: plc
    tcp: {address: 127.0.0.1:%d}
    devices:
      - unit: 1
        device: plc-1
        interval: 100ms
        registers:
          - {name: voltage, function: holding, address: 16, type: uint16, scale: 0.1, unit: V}
          - {name: counter, function: holding, address: 0, type: uint16}
      - unit: 2
        device: plc-2
        interval: 100ms
        registers:
          - {name: unit_id, function: holding, address: 17, type: uint16}
          - {name: missing, function: holding, address: 50, type: uint16}
`, port))
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	waitFor(t, "polls of both units delivered", 30*time.Second, func() bool {
		return tr.lastOf("plc-1") >= 6 && tr.lastOf("plc-2") >= 6
	})
	tr.mu.Lock()
	var good, exc int
	for payload := range tr.seen {
		var m map[string]any
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Errorf("record %q: %v", payload, err)
			continue
		}
		switch {
		case m["voltage"] == 230.1:
			good++
		case m["unit_id"] == 2.0 && m["quality"] == "exception":
			exc++
		default:
			t.Errorf("record %s", payload)
		}
	}
	tr.mu.Unlock()
	// (A group made by a subscribe starts at new records: the first poll
	// may come before the worker.)
	if good < 4 || exc < 4 {
		t.Errorf("%d good records of unit 1, %d exception records of unit 2", good, exc)
	}
	v := scrapeMetrics(t, n, "")
	if v[`edgeq_modbus_device_polls_total{bus="plc",device="plc-1",unit="1"}`] < 5 ||
		v[`edgeq_modbus_device_exceptions_total{bus="plc",code="2",device="plc-2",unit="2"}`] < 5 ||
		v[`edgeq_modbus_open{bus="plc"}`] != 1 {
		t.Errorf("modbus metrics: %v", filterKeys(v, "edgeq_modbus_"))
	}
	resp, err := http.Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Modbus []struct {
			Name    string
			Open    bool
			Devices []struct {
				Device     string
				Polls      uint64
				Exceptions map[string]uint64
				LastError  string `json:"last_error"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Modbus) != 1 || !st.Modbus[0].Open || len(st.Modbus[0].Devices) != 2 ||
		st.Modbus[0].Devices[0].Polls < 5 || !strings.Contains(st.Modbus[0].Devices[1].LastError, "(missing)") {
		t.Errorf("status %+v", st)
	}
}

func filterKeys(v map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, x := range v {
		if strings.HasPrefix(k, prefix) {
			out[k] = x
		}
	}
	return out
}
