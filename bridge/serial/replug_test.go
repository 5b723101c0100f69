package serial

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func meterFrame(dev string, i int) string {
	return fmt.Sprintf(`{"id":%q,"n":%d}`+"\n", dev, i)
}

// TestPortSurvivesUnplugReplug: the sensor side closes its pty (the bridge
// sees a read error), a new pty appears behind the same link; the bridge
// reopens and ingests every frame written after the replug, including those
// written before it got round to reopening.
func TestPortSurvivesUnplugReplug(t *testing.T) {
	link := filepath.Join(t.TempDir(), "usb-FTDI_FT232R_A10K4ZQX-if00-port0")
	first := newSensor(t)
	pointLink(t, link, first.path)
	log := openLog(t)
	p := startPort(t, portConfig("replug", link), log)
	waitOpen(t, p, first.path)

	for i := range 10 {
		first.write(t, meterFrame("m1", i))
	}
	first.write(t, `{"id":"m1","n":`) // cut off by the unplug
	waitStored(t, p, 10)
	waitFor(t, "the partial frame read", func() bool { return p.Status().BytesIn > 0 && p.Status().Stored == 10 })

	first.unplug()
	waitFor(t, "the port closed after the unplug", func() bool {
		st := p.Status()
		return !st.Open && strings.Contains(st.LastError, "read")
	})

	second := newSensor(t)
	pointLink(t, link, second.path)
	for i := 10; i < 15; i++ { // before the bridge reopens, most likely
		second.write(t, meterFrame("m1", i))
	}
	waitOpen(t, p, second.path)
	for i := 15; i < 20; i++ {
		second.write(t, meterFrame("m1", i))
	}
	waitStored(t, p, 20)

	st := p.Status()
	if st.Reopens != 1 || st.Opens != 2 {
		t.Errorf("opens %d reopens %d, want 2 and 1", st.Opens, st.Reopens)
	}
	if st.Dropped["incomplete"] != 1 {
		t.Errorf("dropped %v, want the cut-off frame counted as incomplete", st.Dropped)
	}
	checkAccounting(t, st)
	recs := byDevice(t, readAll(t, log))["m1"]
	if len(recs) != 20 {
		t.Fatalf("%d records, want 20", len(recs))
	}
	for i, r := range recs {
		if want := strings.TrimSuffix(meterFrame("m1", i), "\n"); string(r.Payload) != want {
			t.Fatalf("record %d: %s, want %s", i, r.Payload, want)
		}
	}
}

// TestPortAbsentAtStart: a port whose path does not exist yet is retried,
// not fatal, and picked up when its link appears.
func TestPortAbsentAtStart(t *testing.T) {
	link := filepath.Join(t.TempDir(), "usb-late-if00")
	log := openLog(t)
	p := startPort(t, portConfig("late", link), log)
	waitFor(t, "two failed attempts", func() bool {
		st := p.Status()
		return st.OpenFailures >= 2 && !st.Open && strings.Contains(st.LastError, "waiting for "+link)
	})

	s := newSensor(t)
	pointLink(t, link, s.path)
	waitOpen(t, p, s.path)
	for i := range 5 {
		s.write(t, meterFrame("late-1", i))
	}
	waitStored(t, p, 5)
	if n := len(byDevice(t, readAll(t, log))["late-1"]); n != 5 {
		t.Fatalf("%d records in the log, want 5", n)
	}
}
