package modbus

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"edgeq/wal"
)

// python is Debian's interpreter: the one python3-pymodbus installs into
// (the python3 on PATH may be another).
const python = "/usr/bin/python3"

// needPymodbus skips without pymodbus, or fails under CI=true.
func needPymodbus(t testing.TB) {
	t.Helper()
	if err := exec.Command(python, "-c", "import pymodbus, serial").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pymodbus not importable by %s (%v), and CI=true: install python3-pymodbus (scripts/install-test-deps.sh)", python, err)
		}
		t.Skipf("pymodbus not importable by %s: %v", python, err)
	}
}

// slave is a pymodbus server process (testdata/slave.py).
type slave struct {
	cmd  *exec.Cmd
	port int
	once sync.Once
}

func startSlave(t testing.TB, args ...string) *slave {
	t.Helper()
	needPymodbus(t)
	cmd := exec.Command(python, append([]string{"testdata/slave.py"}, args...)...)
	cmd.Stderr = &testLogWriter{t: t, prefix: "slave: "}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &slave{cmd: cmd}
	t.Cleanup(s.kill)
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			_, err := fmt.Sscanf(sc.Text(), "READY %d", &s.port)
			ready <- err
		} else {
			ready <- fmt.Errorf("slave exited before READY: %v", sc.Err())
		}
		for sc.Scan() {
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("slave not ready after 30s")
	}
	return s
}

func (s *slave) kill() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

// stop and cont freeze and thaw the slave: a slave that stops answering.
func (s *slave) stop(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

func (s *slave) cont(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// rawPty opens a pseudo-terminal whose slave side is raw from the start.
func rawPty(t testing.TB) (master, slave *os.File) {
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
	// A non-blocking master goes through Go's poller, so that Close ends a
	// Read blocked on it (the relay's goroutines).
	// (CLOEXEC: a master leaked into the slave process would keep edgeq's
	// side from hanging up on unplug.)
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = master.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), slave
}

// wire is an RS-485 cable between two pseudo-terminals, written in the
// test: the slave opens one side, edgeq the other (through a by-id style
// link). The relay between the masters can flip a byte of the next
// responses, pace bytes at a baud rate, and be unplugged and replugged on
// edgeq's side.
type wire struct {
	t          testing.TB
	slaveSide  *os.File // master of the slave's pty
	slavePath  string
	link       string // what edgeq opens
	mu         sync.Mutex
	edgeMaster *os.File
	edgeSlave  *os.File
	flips      atomic.Int32 // responses still to corrupt
	flipped    atomic.Int32
	// armed: a request went to the slave and its response is not
	// corrupted yet.
	armed    atomic.Bool
	charTime time.Duration // 0: no pacing
	wg       sync.WaitGroup
}

func newWire(t testing.TB, charTime time.Duration) *wire {
	t.Helper()
	m, s := rawPty(t)
	w := &wire{t: t, slaveSide: m, slavePath: s.Name(), charTime: charTime,
		link: filepath.Join(t.TempDir(), "usb-FTDI_FT232R_MB485-if00-port0")}
	// The slave pty's own slave fd stays open in the test so that the slave
	// process opening and closing it does not hang up the master.
	w.plug()
	w.wg.Add(1)
	go w.fromSlave()
	t.Cleanup(func() {
		w.unplug()
		_ = m.Close()
		_ = s.Close()
		w.wg.Wait()
	})
	return w
}

// plug gives edgeq a fresh pty behind the link, as a replugged adapter.
func (w *wire) plug() {
	m, s := rawPty(w.t)
	w.mu.Lock()
	w.edgeMaster, w.edgeSlave = m, s
	w.mu.Unlock()
	tmp := w.link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(s.Name(), tmp); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.link); err != nil {
		w.t.Fatal(err)
	}
	w.wg.Add(1)
	go w.fromEdge(m)
}

// unplug closes edgeq's pty: its next read or write fails.
func (w *wire) unplug() {
	w.mu.Lock()
	m, s := w.edgeMaster, w.edgeSlave
	w.edgeMaster, w.edgeSlave = nil, nil
	w.mu.Unlock()
	if m != nil {
		_ = m.Close()
		_ = s.Close()
	}
}

// fromEdge copies requests to the slave.
func (w *wire) fromEdge(m *os.File) {
	defer w.wg.Done()
	buf := make([]byte, 512)
	for {
		n, err := m.Read(buf)
		if err != nil {
			return
		}
		w.armed.Store(true)
		w.pace(w.slaveSide, buf[:n])
	}
}

// fromSlave copies responses to edgeq, flipping a bit of the last data byte
// before the CRC of a response when asked.
func (w *wire) fromSlave() {
	defer w.wg.Done()
	buf := make([]byte, 512)
	for {
		n, err := w.slaveSide.Read(buf)
		if err != nil {
			return
		}
		if w.flips.Load() > 0 && w.armed.CompareAndSwap(true, false) {
			// A response can come in several reads on a loaded machine:
			// gather the whole frame, so that the flip lands before its CRC
			// and each flip corrupts one response.
			for {
				want := relayFrameLen(buf[:n])
				if want > 0 && n >= want || want == 0 && n >= 3 || n == len(buf) {
					break // whole, or not a frame this relay knows (passed on as it is)
				}
				m, err := w.slaveSide.Read(buf[n:])
				if err != nil {
					return
				}
				n += m
			}
			if want := relayFrameLen(buf[:n]); want >= 5 && want <= n && w.flips.Add(-1) >= 0 {
				buf[want-3] ^= 0x10
				w.flipped.Add(1)
			}
		}
		w.mu.Lock()
		m := w.edgeMaster
		w.mu.Unlock()
		if m != nil {
			w.pace(m, buf[:n]) // unplugged: the bytes are lost, as on a cable
		}
	}
}

// relayFrameLen is the length of the RTU response that b begins: 0 while b
// is too short to tell, or for a function this relay does not know.
func relayFrameLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch fn := b[1]; {
	case fn&0x80 != 0:
		return 5 // unit, function, exception code, CRC
	case fn >= 1 && fn <= 4:
		if len(b) < 3 {
			return 0
		}
		return 3 + int(b[2]) + 2
	}
	return 0
}

// pace writes b, a character at a time at the wire's baud rate.
func (w *wire) pace(dst *os.File, b []byte) {
	if w.charTime == 0 {
		_, _ = dst.Write(b)
		return
	}
	next := time.Now()
	for i := range b {
		_, _ = dst.Write(b[i : i+1])
		next = next.Add(w.charTime)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
}

// testLogWriter forwards lines to t.Log while the test runs.
type testLogWriter struct {
	mu     sync.Mutex
	t      testing.TB
	prefix string
	done   bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
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

func startBus(t testing.TB, cfg Config, l *wal.Log) *Bus {
	t.Helper()
	b, err := New(cfg, l, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(10 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return b
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second) // bounds a hang only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// records reads every durable record of device, decoded.
func records(t testing.TB, l *wal.Log, device string) []map[string]any {
	t.Helper()
	// Appends become durable (readable) a moment after the poll that made
	// them: wait until every record the log accepted for device is there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := readRecords(t, l, device)
		info, _ := l.Device(device)
		if uint64(len(out)) >= info.LastSeq || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readRecords(t testing.TB, l *wal.Log, device string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for p := range l.NumPartitions() {
		for from := uint64(1); ; {
			b, err := l.Read(p, from, 1024, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Entries) == 0 {
				break
			}
			for _, e := range b.Entries {
				if e.Record.Kind != wal.KindData || e.Record.Device != device {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal(e.Record.Payload, &m); err != nil {
					t.Fatalf("record %s: %v", e.Record.Payload, err)
				}
				out = append(out, m)
			}
			from = b.Next
		}
	}
	return out
}

// testMap is the register map of testdata/slave.py.
func testMap() []Register {
	return []Register{
		{Name: "counter", Function: HoldingRegister, Address: 0, Type: Uint16},
		{Name: "i16", Function: HoldingRegister, Address: 1, Type: Int16},
		{Name: "u32", Function: HoldingRegister, Address: 2, Type: Uint32},
		{Name: "i32_cdab", Function: HoldingRegister, Address: 4, Type: Int32, WordOrder: Little},
		{Name: "f32", Function: HoldingRegister, Address: 6, Type: Float32},
		{Name: "f32_cdab", Function: HoldingRegister, Address: 8, Type: Float32, WordOrder: Little},
		{Name: "f32_badc", Function: HoldingRegister, Address: 10, Type: Float32, ByteOrder: Little},
		{Name: "f64_dcba", Function: HoldingRegister, Address: 12, Type: Float64, ByteOrder: Little, WordOrder: Little},
		{Name: "voltage", Function: HoldingRegister, Address: 16, Type: Uint16, Scale: 0.1, Unit: "V"},
		{Name: "unit_id", Function: HoldingRegister, Address: 17, Type: Uint16},
		{Name: "serial", Function: HoldingRegister, Address: 18, Type: String, Count: 4},
		{Name: "temp", Function: HoldingRegister, Address: 22, Type: Int16, Scale: 0.01, Unit: "C"},
		{Name: "uptime", Function: InputRegister, Address: 0, Type: Float32},
		{Name: "coil0", Function: Coils, Address: 0},
		{Name: "coils", Function: Coils, Address: 1, Count: 9},
		{Name: "di", Function: DiscreteInputs, Address: 0, Count: 4},
	}
}

// wantStatic are the values of testMap that do not change over time, for
// unit u.
func wantStatic(u int) map[string]any {
	return map[string]any{
		"i16": -1234.0, "u32": 305419896.0, "i32_cdab": -100000.0,
		"f32": 230.5, "f32_cdab": 12.25, "f32_badc": -3.5, "f64_dcba": 1234.5678,
		"voltage": 230.1, "unit_id": float64(u), "serial": fmt.Sprintf("EDGEQ-%02d", u),
		"coil0": true, "coils": []any{false, true, true, false, false, false, true, true, true},
		"di": []any{false, true, true, false},
	}
}
