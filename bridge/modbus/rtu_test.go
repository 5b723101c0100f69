package modbus

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"edgeq/bridge/serial"
)

func rtuConfig(name, path string, devs ...Device) Config {
	c := DefaultConfig()
	c.Name = name
	// No parity: a pty refuses PARENB to pyserial (EINVAL).
	c.RTU = &RTU{Path: path, Baud: 19200, Parity: serial.ParityNone}
	// Generous: under load the slave and the relay answer late, and a
	// response timeout where a test expects good reads or CRC errors is a
	// false failure. Tests that want timeouts set their own.
	c.Timeout = 2 * time.Second
	c.Devices = devs
	return c
}

func checkValues(t *testing.T, rec map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if got := fmt.Sprint(rec[k]); got != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v (record %v)", k, rec[k], w, rec)
		}
	}
}

// TestRTUAgainstPymodbus: a real pymodbus RTU slave behind a pty pair.
// Every type, byte and word order and scale decodes to the value the slave
// encoded; values that change over time arrive changed; reads are merged.
func TestRTUAgainstPymodbus(t *testing.T) {
	w := newWire(t, 0)
	startSlave(t, "rtu", w.slavePath, "19200", "7")
	l := openLog(t)
	b := startBus(t, rtuConfig("rs485", w.link, Device{Unit: 7, Device: "meter-7", Interval: 50 * time.Millisecond, Registers: testMap()}), l)
	waitFor(t, "10 good polls stored", func() bool {
		st := b.Status()
		ds := st.Devices[0]
		return ds.Polls-ds.FailedPolls >= 10 && st.Stored == ds.Polls // stored: durable
	})
	recs := records(t, l, "meter-7")
	var good []map[string]any
	for _, r := range recs {
		if r["quality"] == nil {
			good = append(good, r)
		}
	}
	if len(good) < 10 {
		t.Fatalf("%d good records of %d: %v", len(good), len(recs), recs)
	}
	for _, r := range good {
		checkValues(t, r, wantStatic(7))
		if _, err := time.Parse(time.RFC3339Nano, r["ts"].(string)); err != nil {
			t.Errorf("ts: %v", err)
		}
		if temp := r["temp"].(float64); temp < 19.99 || temp > 30.01 {
			t.Errorf("temp %v, want 20..30", temp)
		}
	}
	first, last := good[0]["counter"].(float64), good[len(good)-1]["counter"].(float64)
	if first == last {
		t.Errorf("counter stayed %v over %d polls: values do not change over time", first, len(good))
	}
	if good[0]["uptime"].(float64) >= good[len(good)-1]["uptime"].(float64) {
		t.Errorf("uptime did not grow: %v then %v", good[0]["uptime"], good[len(good)-1]["uptime"])
	}
	st := b.Status()
	ds := st.Devices[0]
	// holding 0..22 in one request, input, coils and discrete in one each.
	if perPoll := float64(ds.Requests) / float64(ds.Polls); perPoll > 4.5 {
		t.Errorf("%.1f requests per poll, want 4 (merged reads)", perPoll)
	}
	if !st.Open || st.Kind != "rtu" || st.Stored == 0 || ds.LastGood.IsZero() || ds.LastLatency <= 0 {
		t.Errorf("status %+v", st)
	}
}

// TestRTUExceptionAndSilentSlave: registers the slave does not have get
// exception 2, recorded with their names while the others are read; a
// frozen slave times out (retried, other devices unaffected), and comes
// back.
func TestRTUExceptionAndSilentSlave(t *testing.T) {
	w := newWire(t, 0)
	s := startSlave(t, "rtu", w.slavePath, "19200", "1", "2")
	l := openLog(t)
	regs := []Register{
		{Name: "unit_id", Function: HoldingRegister, Address: 17, Type: Uint16},
		{Name: "missing_a", Function: HoldingRegister, Address: 100, Type: Uint32},
		{Name: "missing_b", Function: HoldingRegister, Address: 102, Type: Int16},
	}
	cfg := rtuConfig("rs485", w.link,
		Device{Unit: 1, Device: "d1", Interval: 50 * time.Millisecond, Registers: regs},
		Device{Unit: 2, Device: "d2", Interval: 50 * time.Millisecond, Registers: regs[:1]},
		Device{Unit: 9, Device: "nobody", Interval: 50 * time.Millisecond, Registers: regs[:1]},
	)
	// Unit 9 must time out, so this bounds how slow the test is; 100ms
	// timed out live units under load.
	cfg.Timeout = time.Second
	cfg.Retries = 1
	cfg.MaxBackoff = 400 * time.Millisecond
	b := startBus(t, cfg, l)
	waitFor(t, "exceptions from unit 1 and polls of unit 2", func() bool {
		st := b.Status()
		return st.Devices[0].Exceptions["2"] >= 3 && st.Devices[1].Polls-st.Devices[1].FailedPolls >= 10 &&
			st.Devices[2].Errors["timeout"] >= 2
	})
	waitFor(t, "records durable", func() bool { return len(records(t, l, "d1")) > 0 })
	// Every poll of unit 1 that got an answer read unit_id and got exception
	// 2 for the others. (A poll whose answer came too late on a loaded
	// machine is a timeout record, and the late answer can then be read as
	// the next request's, garbled: allowed, but not all of them.)
	exceptions := 0
	for _, r := range records(t, l, "d1") {
		if r["quality"] == "timeout" || r["quality"] == "garbled" {
			continue
		}
		exceptions++
		if r["unit_id"] != 1.0 || r["quality"] != "exception" {
			t.Fatalf("record %v, want unit_id 1 and quality exception", r)
		}
		errs, _ := r["errors"].(map[string]any)
		for _, name := range []string{"missing_a", "missing_b"} {
			if e, _ := errs[name].(string); !strings.Contains(e, "illegal data address") {
				t.Errorf("errors[%s] = %q, want illegal data address", name, e)
			}
		}
	}
	if exceptions == 0 {
		t.Fatal("no record of unit 1 with quality exception")
	}
	// The last error is the latest failed poll's: an exception names the
	// registers (a late answer in between would be a timeout).
	waitFor(t, "an exception as unit 1's last error naming the registers", func() bool {
		return strings.Contains(b.Status().Devices[0].LastError, "missing_a, missing_b")
	})
	st := b.Status()
	// Unit 9 is not there: it times out, and unit 2 is polled all the while.
	nob := st.Devices[2]
	if nob.Polls == 0 || nob.FailedPolls != nob.Polls || nob.Retries == 0 {
		t.Errorf("absent unit: %+v", nob)
	}
	if rs := records(t, l, "nobody"); len(rs) == 0 || rs[0]["quality"] != "timeout" {
		t.Errorf("absent unit records %v, want quality timeout", rs)
	}

	// Freeze the slave: everyone times out; thaw: unit 2 reads again.
	s.stop(t)
	before := b.Status().Devices[1].Errors["timeout"]
	waitFor(t, "timeouts of unit 2 while the slave is frozen", func() bool {
		return b.Status().Devices[1].Errors["timeout"] >= before+2
	})
	s.cont(t)
	good := b.Status().Devices[1].Polls - b.Status().Devices[1].FailedPolls
	waitFor(t, "unit 2 good again", func() bool {
		d := b.Status().Devices[1]
		return d.Polls-d.FailedPolls >= good+3
	})
}

// TestRTUCorruptCRC: a relay flips a bit in responses; the frames are
// counted as CRC errors, retried, and no corrupt value is stored.
func TestRTUCorruptCRC(t *testing.T) {
	w := newWire(t, 0)
	startSlave(t, "rtu", w.slavePath, "19200", "3")
	l := openLog(t)
	cfg := rtuConfig("rs485", w.link, Device{Unit: 3, Device: "m3", Interval: 50 * time.Millisecond, Registers: testMap()[:12]})
	cfg.Retries = 3
	b := startBus(t, cfg, l)
	waitFor(t, "a good poll", func() bool { return b.Status().Stored >= 1 })
	w.flips.Store(5)
	waitFor(t, "5 corrupted responses", func() bool { return w.flipped.Load() >= 5 })
	stored := b.Status().Stored
	waitFor(t, "polls after the corruption", func() bool { return b.Status().Stored >= stored+5 })
	ds := b.Status().Devices[0]
	if ds.Errors["crc"] < 5 || ds.Retries < 4 {
		t.Errorf("crc errors %d retries %d, want >= 5 and >= 4: %+v", ds.Errors["crc"], ds.Retries, ds)
	}
	want := wantStatic(3)
	for _, k := range []string{"coil0", "coils", "di"} {
		delete(want, k) // not in this map
	}
	var crcRecords int
	for _, r := range records(t, l, "m3") {
		switch r["quality"] {
		case nil:
			checkValues(t, r, want)
		case "crc":
			crcRecords++ // a poll whose every try was corrupted
		default:
			t.Errorf("record %v", r)
		}
	}
	if uint64(crcRecords) != ds.FailedPolls {
		t.Errorf("%d records with quality crc, %d failed polls", crcRecords, ds.FailedPolls)
	}
}

// TestRTUUnplugReplug: the adapter disappears (its pty closes) and comes
// back as another pty behind the same by-id link; the bus reopens it and
// polls again, having recorded the gap as unavailable.
func TestRTUUnplugReplug(t *testing.T) {
	w := newWire(t, 0)
	startSlave(t, "rtu", w.slavePath, "19200", "4")
	l := openLog(t)
	cfg := rtuConfig("rs485", w.link, Device{Unit: 4, Device: "m4", Interval: 50 * time.Millisecond, Registers: testMap()[:3]})
	cfg.ReopenMin, cfg.ReopenMax = 50*time.Millisecond, 200*time.Millisecond
	b := startBus(t, cfg, l)
	waitFor(t, "good polls", func() bool { return b.Status().Stored >= 3 })
	w.unplug()
	waitFor(t, "the bus closed and failing to reopen", func() bool {
		st := b.Status()
		return !st.Open && st.OpenFailures >= 1
	})
	waitFor(t, "a poll recorded unavailable", func() bool { return b.Status().Devices[0].Errors["unavailable"] >= 1 })
	w.plug()
	waitFor(t, "reopened", func() bool { st := b.Status(); return st.Open && st.Reopens >= 1 })
	n := b.Status().Devices[0].Polls - b.Status().Devices[0].FailedPolls
	waitFor(t, "good polls after the replug", func() bool {
		d := b.Status().Devices[0]
		return d.Polls-d.FailedPolls >= n+3
	})
	var unavailable int
	for _, r := range records(t, l, "m4") {
		if r["quality"] == "unavailable" || r["quality"] == "link" {
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Error("no record says the device was unavailable")
	}
}
