package mqtt

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mosquitto is a real broker run by a test on a free loopback port, with its
// own config file and persistence in a temporary directory.
type mosquitto struct {
	t    testing.TB
	bin  string
	dir  string
	conf string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// brokerOptions are extra mosquitto settings.
type brokerOptions struct {
	maxInflight int // max_inflight_messages; 0 keeps mosquitto's default (20)
	// extra is appended to the config file, e.g. a second listener.
	extra string
}

func mosquittoBinary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("mosquitto not installed, and CI=true: install the mosquitto package")
	}
	t.Skip("mosquitto not installed")
	return ""
}

// startMosquitto starts a broker and stops it (SIGTERM) when the test ends.
func startMosquitto(t testing.TB, o brokerOptions) *mosquitto {
	t.Helper()
	m := &mosquitto{t: t, bin: mosquittoBinary(t), dir: t.TempDir()}
	m.port = freePort(t)
	m.conf = filepath.Join(m.dir, "mosquitto.conf")
	var c strings.Builder
	fmt.Fprintf(&c, "listener %d 127.0.0.1\n", m.port)
	c.WriteString("allow_anonymous true\n")
	c.WriteString("persistence true\n")
	fmt.Fprintf(&c, "persistence_location %s/\n", m.dir)
	// The bridge's no-loss promise needs the broker to queue everything for
	// an offline or stalled session; mosquitto's default drops after 1000.
	c.WriteString("max_queued_messages 0\n")
	if o.maxInflight > 0 {
		fmt.Fprintf(&c, "max_inflight_messages %d\n", o.maxInflight)
	}
	fmt.Fprintf(&c, "log_dest file %s\n", filepath.Join(m.dir, "mosquitto.log"))
	c.WriteString("log_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
	if os.Geteuid() == 0 {
		c.WriteString("user root\n") // else mosquitto drops to "mosquitto", which cannot write t.TempDir()
	}
	c.WriteString(o.extra)
	if err := os.WriteFile(m.conf, []byte(c.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() {
		m.signal(syscall.SIGTERM)
		if t.Failed() {
			m.dumpLog()
		}
	})
	return m
}

func (m *mosquitto) url() string  { return "tcp://127.0.0.1:" + strconv.Itoa(m.port) }
func (m *mosquitto) addr() string { return "127.0.0.1:" + strconv.Itoa(m.port) }

// start runs mosquitto and waits until it accepts connections. It retries
// for a while: after a restart the port can be busy for a moment.
func (m *mosquitto) start() {
	m.t.Helper()
	var err error
	for try := 0; try < 30; try++ {
		if err = m.tryStart(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.t.Fatalf("mosquitto did not start on port %d: %v", m.port, err)
}

func (m *mosquitto) tryStart() error {
	cmd := exec.Command(m.bin, "-c", m.conf)
	// Dies with the test binary, even one killed by the test timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mosquitto: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		select {
		case <-done:
			return fmt.Errorf("mosquitto exited: %s", stderr.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", m.addr(), 100*time.Millisecond); err == nil {
			_ = c.Close()
			m.cmd, m.done = cmd, done
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return errors.New("mosquitto did not accept connections within 5s")
}

// signal sends sig and waits for mosquitto to exit.
func (m *mosquitto) signal(sig syscall.Signal) {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	m.cmd = nil
}

func (m *mosquitto) dumpLog() {
	b, err := os.ReadFile(filepath.Join(m.dir, "mosquitto.log"))
	if err != nil {
		return
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	m.t.Logf("mosquitto log (tail):\n%s", b)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
