package modbus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTCPAgainstPymodbus: pymodbus's TCP server on loopback with three unit
// IDs behind one address; each device's records carry its own unit's
// values; a unit the server does not have times out (pymodbus ignores it)
// without holding up the others; killing the server makes the bus
// reconnect once it is back... on a new port, so here: the connection
// loss is counted and the polls of the gap are unavailable.
func TestTCPAgainstPymodbus(t *testing.T) {
	s := startSlave(t, "tcp", "1", "2", "3")
	l := openLog(t)
	c := DefaultConfig()
	c.Name = "plc"
	c.TCP = &TCP{Address: fmt.Sprintf("127.0.0.1:%d", s.port)}
	c.Timeout = time.Second // unit 42 must time out; 200ms timed out live units under load
	c.Retries = 1
	for u := 1; u <= 3; u++ {
		c.Devices = append(c.Devices, Device{Unit: u, Device: fmt.Sprintf("plc-%d", u), Interval: 50 * time.Millisecond, Registers: testMap()})
	}
	c.Devices = append(c.Devices, Device{Unit: 42, Device: "plc-42", Interval: 50 * time.Millisecond, Registers: testMap()[:1]})
	b := startBus(t, c, l)
	waitFor(t, "5 good polls of each unit stored", func() bool {
		st := b.Status()
		var polls uint64
		for i, d := range st.Devices {
			if i < 3 && d.Polls-d.FailedPolls < 5 {
				return false
			}
			polls += d.Polls
		}
		return st.Stored+uint64(st.Pending) >= polls && st.Pending == 0
	})
	for u := 1; u <= 3; u++ {
		recs := records(t, l, fmt.Sprintf("plc-%d", u))
		if len(recs) < 5 {
			t.Fatalf("unit %d: %d records", u, len(recs))
		}
		for _, r := range recs {
			if r["quality"] == nil {
				checkValues(t, r, wantStatic(u))
			}
		}
	}
	st := b.Status()
	if !st.Open || st.Kind != "tcp" || st.Opens != 1 {
		t.Errorf("status %+v", st)
	}
	if d := st.Devices[3]; d.Polls == 0 || d.FailedPolls != d.Polls {
		t.Errorf("absent unit 42: %+v", d)
	}

	s.kill()
	waitFor(t, "the connection loss noticed", func() bool {
		st := b.Status()
		return !st.Open && st.OpenFailures >= 1
	})
	waitFor(t, "polls recorded unavailable", func() bool { return b.Status().Devices[0].Errors["unavailable"] >= 1 })
}

// TestReadOnce is `edgeq modbus read`: one poll per device, values and the
// record it would store, and a missing register reported with its error.
func TestReadOnce(t *testing.T) {
	s := startSlave(t, "tcp", "5")
	c := DefaultConfig()
	c.Name = "plc"
	c.TCP = &TCP{Address: fmt.Sprintf("127.0.0.1:%d", s.port)}
	regs := append(testMap()[8:11], Register{Name: "missing", Function: HoldingRegister, Address: 40, Type: Uint16})
	c.Devices = []Device{{Unit: 5, Device: "m5", Registers: regs}}
	c.Timeout = 10 * time.Second // one poll: a timeout under load would fail the test
	rs, err := ReadOnce(context.Background(), c, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || len(rs[0].Values) != 4 {
		t.Fatalf("readings %+v", rs)
	}
	got := map[string]string{}
	for _, v := range rs[0].Values {
		got[v.Register.Name] = fmt.Sprint(v.Value)
		if v.Err != nil {
			got[v.Register.Name] = v.Err.Error()
		}
	}
	want := map[string]string{"voltage": "230.1", "unit_id": "5", "serial": "EDGEQ-05", "missing": "exception 2 (illegal data address) to function 3"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	if !strings.Contains(string(rs[0].Record), `"quality":"exception"`) {
		t.Errorf("record %s", rs[0].Record)
	}
	// Nothing listening: an error, not a hang.
	c.TCP.Address = "127.0.0.1:1"
	if _, err := ReadOnce(context.Background(), c, testLogger(t)); err == nil {
		t.Error("no error with nothing listening")
	}
}
