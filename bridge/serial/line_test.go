package serial

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLine: a Line claims its path against Ports and other Lines, reads and
// writes the device, reports an unplug as a read error, reopens the path
// anew and gives the claim back on Release.
func TestLine(t *testing.T) {
	link := filepath.Join(t.TempDir(), "usb-rs485-if00")
	s := newSensor(t)
	pointLink(t, link, s.path)
	mode := LineMode{Baud: 9600, DataBits: 8, Parity: ParityNone, StopBits: 1}
	if _, err := NewLine("bad", link, LineMode{Baud: 9600, DataBits: 9, Parity: ParityNone, StopBits: 1}, testLogger(t)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("data_bits 9: %v", err)
	}
	l, err := NewLine("modbus:a", link, mode, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLine("modbus:b", link, mode, testLogger(t)); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("second line on the path: %v", err)
	}
	log := openLog(t)
	if p, _ := New(portConfig("p", link), log, testLogger(t)); p.Start(t.Context()) == nil {
		_ = p.Stop(time.Second)
		t.Fatal("a port started on a line's path")
	}
	if _, err := l.Read(make([]byte, 1)); err == nil {
		t.Fatal("read before open")
	}
	dev, err := l.Open(50 * time.Millisecond)
	if err != nil || dev != s.path {
		t.Fatalf("open: %s %v", dev, err)
	}
	if _, err := l.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if n, err := s.master.Read(got); err != nil || string(got[:n]) != "ping" {
		t.Fatalf("sensor read %q %v", got[:n], err)
	}
	s.write(t, "pong")
	buf := make([]byte, 16)
	var n int
	for deadline := time.Now().Add(5 * time.Second); n < 4 && time.Now().Before(deadline); {
		k, err := l.Read(buf[n:])
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if string(buf[:n]) != "pong" {
		t.Fatalf("line read %q", buf[:n])
	}
	if k, err := l.Read(buf); k != 0 || err != nil {
		t.Fatalf("idle read: %d %v, want a timeout (0, nil)", k, err)
	}
	s.unplug()
	if _, err := l.Read(buf); err == nil {
		t.Fatal("no error after the unplug")
	}
	l.CloseDevice()
	s2 := newSensor(t)
	pointLink(t, link, s2.path)
	if dev, err := l.Open(50 * time.Millisecond); err != nil || dev != s2.path {
		t.Fatalf("reopen: %s %v", dev, err)
	}
	l.Release()
	if err := claims.claimConfigured(filepath.Clean(link), "x"); err != nil {
		t.Fatalf("claim not released: %v", err)
	}
	claims.releaseConfigured(filepath.Clean(link), "x")
	if _, err := l.Open(time.Millisecond); err == nil {
		t.Fatal("open after release")
	}
}
