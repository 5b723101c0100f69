package serial

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"edgeq/wal"
)

// sensor is the far end of a pseudo-terminal: what a serial sensor is to
// the bridge. Its line is raw from the start, so bytes written before the
// bridge opens the port are delivered unchanged.
type sensor struct {
	master, slave *os.File
	path          string // /dev/pts/N
	once          sync.Once
}

func newSensor(t testing.TB) *sensor {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	s := &sensor{master: master, slave: slave, path: slave.Name()}
	t.Cleanup(s.unplug)
	return s
}

func (s *sensor) write(t testing.TB, data string) {
	t.Helper()
	if _, err := s.master.Write([]byte(data)); err != nil {
		t.Fatalf("sensor write: %v", err)
	}
}

// unplug closes both ends: the bridge's next read fails, the node vanishes.
func (s *sensor) unplug() {
	s.once.Do(func() {
		_ = s.master.Close()
		_ = s.slave.Close()
	})
}

// pointLink makes link point at target, atomically (as udev replaces a
// by-id link).
func pointLink(t testing.TB, link, target string) {
	t.Helper()
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// testLogger forwards to t.Log while the test runs and drops lines after it,
// when writer goroutines may still log.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func openLog(t testing.TB) *wal.Log {
	t.Helper()
	l, err := wal.Open(filepath.Join(t.TempDir(), "wal"), wal.DefaultOptions(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// portConfig is a valid config for a port at path with the test's defaults.
func portConfig(name, path string) Config {
	c := DefaultConfig()
	c.Name, c.Path = name, path
	return c
}

// startPort starts a port and stops it at cleanup (before the log closes,
// since cleanups run last-in first-out).
func startPort(t testing.TB, cfg Config, app *wal.Log) *Port {
	t.Helper()
	p, err := New(cfg, app, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return p
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitOpen(t testing.TB, p *Port, device string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("serial[%s] open on %s", p.Name(), device), func() bool {
		st := p.Status()
		return st.Open && st.ResolvedPath == device
	})
}

func waitStored(t testing.TB, p *Port, n uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d frames stored", n), func() bool { return p.Status().Stored >= n })
	if st := p.Status(); st.Stored != n {
		t.Fatalf("stored %d frames, want %d: %+v", st.Stored, n, st)
	}
}

// readAll reads every durable record of every partition, copied.
func readAll(t testing.TB, l *wal.Log) []wal.Record {
	t.Helper()
	// Serial records wait for nobody: make them durable (readable) first.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var out []wal.Record
	for p := range l.NumPartitions() {
		for from := uint64(1); ; {
			b, err := l.Read(p, from, 1024, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if b.Corrupt > 0 || b.Lost > 0 {
				t.Fatalf("partition %d: %d corrupt, %d lost", p, b.Corrupt, b.Lost)
			}
			if len(b.Entries) == 0 {
				break
			}
			for _, e := range b.Entries {
				r := e.Record
				r.Payload = append([]byte(nil), r.Payload...)
				r.Headers = append([]wal.Header(nil), r.Headers...)
				out = append(out, r)
			}
			from = b.Next
		}
	}
	return out
}

// byDevice groups records by device in log order (sequence order).
func byDevice(t testing.TB, recs []wal.Record) map[string][]wal.Record {
	t.Helper()
	m := map[string][]wal.Record{}
	for _, r := range recs {
		if r.Kind != wal.KindData {
			continue
		}
		if prev := m[r.Device]; len(prev) > 0 && prev[len(prev)-1].Seq+1 != r.Seq {
			t.Fatalf("device %s: seq %d after %d", r.Device, r.Seq, prev[len(prev)-1].Seq)
		}
		m[r.Device] = append(m[r.Device], r)
	}
	return m
}

// checkAccounting: every frame read is stored, failed or dropped once.
func checkAccounting(t testing.TB, st Status) {
	t.Helper()
	sum := st.Stored + st.StorageErrors + uint64(st.Pending)
	for _, n := range st.Dropped {
		sum += n
	}
	if sum != st.FramesIn {
		t.Fatalf("frames_in %d != stored + storage errors + dropped + pending = %d: %+v", st.FramesIn, sum, st)
	}
}
