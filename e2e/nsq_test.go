package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
)

// The NSQ front end with real clients: go-nsq consumers and producers, a
// consumer process killed with SIGKILL, and nsq_tail / nsq_to_file built
// from the module proxy.

const nsqHelperEnv = "EDGEQ_E2E_NSQ_HELPER"

// nsqToolsDir holds the NSQ tools, built on first use (TestMain removes it).
var (
	nsqToolsDir  string
	nsqToolsOnce sync.Once
	nsqToolsErr  error
)

// nsqTool builds the NSQ apps (nsq_tail, nsq_to_file, nsqd, nsq_stat,
// to_nsq) of nsq v1.3.0 from the module proxy into a temp dir, in a
// throwaway module (their code is never part of this repository). A
// failed build skips, or fails with CI=true.
func nsqTool(t testing.TB, name string) string {
	t.Helper()
	nsqToolsOnce.Do(func() { nsqToolsErr = buildNSQTools(nsqToolsDir) })
	if nsqToolsErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("build NSQ tools (CI=true): %v", nsqToolsErr)
		}
		t.Skipf("build NSQ tools: %v", nsqToolsErr)
	}
	return filepath.Join(nsqToolsDir, name)
}

func buildNSQTools(dir string) error {
	mod := filepath.Join(dir, "mod")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	// nsqd needs nsq's own replace of judwhite/go-svc, which only a main
	// module applies.
	gomod := "module nsqtools\n\ngo 1.26.0\n\nrequire github.com/nsqio/nsq v1.3.0\n\n" +
		"replace github.com/judwhite/go-svc => github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "github.com/nsqio/nsq/apps/nsq_tail",
		"github.com/nsqio/nsq/apps/nsq_to_file", "github.com/nsqio/nsq/apps/nsqd",
		"github.com/nsqio/nsq/apps/nsq_stat", "github.com/nsqio/nsq/apps/to_nsq")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// newNSQNode is a node with NSQ on a free loopback port.
func newNSQNode(t testing.TB, yaml string, env ...string) (*node, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	n := newNode(t, yaml, append([]string{"EDGEQ_NSQ_LISTEN=" + addr}, env...)...)
	return n, addr
}

type nsqStatus struct {
	NSQ struct {
		Connections   int64             `json:"connections"`
		RDY           int64             `json:"rdy"`
		InFlight      int64             `json:"in_flight"`
		RdyExceeded   uint64            `json:"rdy_exceeded"`
		Published     uint64            `json:"published"`
		Delivered     uint64            `json:"delivered"`
		Fin           uint64            `json:"fin"`
		ReqN          uint64            `json:"req"`
		Touch         uint64            `json:"touch"`
		UnknownIDs    uint64            `json:"unknown_ids"`
		SlowConsumers uint64            `json:"slow_consumer_closes"`
		Errors        map[string]uint64 `json:"errors"`
	} `json:"nsq"`
}

func (n *node) nsqStatus(t testing.TB) nsqStatus {
	t.Helper()
	resp, err := n.httpClient().Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st nsqStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// groupLag is what the queue's group has not committed (-1: no such group).
func (n *node) groupLag(t testing.TB, queue string) int64 {
	t.Helper()
	resp, err := n.httpClient().Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Groups []struct {
			Queue string `json:"queue"`
			Lag   int64  `json:"lag"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, g := range st.Groups {
		if g.Queue == queue {
			return g.Lag
		}
	}
	return -1
}

func nsqProducer(t testing.TB, addr string) *nsq.Producer {
	t.Helper()
	p, err := nsq.NewProducer(addr, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLogger(nil, nsq.LogLevelError)
	t.Cleanup(p.Stop)
	return p
}

// publishBacklog publishes perDevice messages to each of devices devices
// with MultiPublish, round robin, bodies {"device":..,"n":..}.
func publishBacklog(t testing.TB, p *nsq.Producer, devices, perDevice int) {
	t.Helper()
	var batch [][]byte
	for i := 1; i <= perDevice; i++ {
		for d := range devices {
			batch = append(batch, fmt.Appendf(nil, `{"device":"d%03d","n":%d,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, d, i))
			if len(batch) == 200 {
				if err := p.MultiPublish("telemetry", batch); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if len(batch) > 0 {
		if err := p.MultiPublish("telemetry", batch); err != nil {
			t.Fatal(err)
		}
	}
}

type telem struct {
	Device string `json:"device"`
	N      int    `json:"n"`
}

// nsqHelperMain is a go-nsq consumer process (MaxInFlight 32) on the
// channel "work" that prints each message it handles, before its FIN, and
// handles slowly, so the test can kill it with messages in flight.
func nsqHelperMain() int {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 32
	c, err := nsq.NewConsumer("telemetry", "work", cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c.SetLogger(nil, nsq.LogLevelError)
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	c.AddConcurrentHandlers(nsq.HandlerFunc(func(m *nsq.Message) error {
		var v telem
		_ = json.Unmarshal(m.Body, &v)
		mu.Lock()
		fmt.Fprintf(w, "%s %d\n", v.Device, v.N)
		w.Flush()
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return nil
	}), 4)
	if err := c.ConnectToNSQD(os.Getenv(nsqHelperEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// TestNSQConsumers: a 20,000-message backlog of 200 devices, published with
// go-nsq's MultiPublish, consumed by 4 go-nsq consumers (MaxInFlight 32, 4
// concurrent handlers each; one found through /lookup) and a consumer
// process killed with SIGKILL mid-stream: every message is finished, each
// device's messages in order and never two at once, REQ redelivers, TOUCH
// is counted, and no connection ever holds more than its RDY.
func TestNSQConsumers(t *testing.T) {
	const devices, perDevice = 200, 100
	n, addr := newNSQNode(t, "groups:\n  - subject: telemetry.>\n    queue: work\n")
	n.start()
	p := nsqProducer(t, addr)
	publishBacklog(t, p, devices, perDevice)

	// The consumer process to kill takes a share first.
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), nsqHelperEnv+"="+addr)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { helper.Process.Kill(); helper.Wait() })
	helperSeen := map[telem]bool{}
	var helperMu sync.Mutex
	helperLines := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			k, _ := strconv.Atoi(f[1])
			helperMu.Lock()
			helperSeen[telem{f[0], k}] = true
			if len(helperSeen) >= 300 {
				select {
				case helperLines <- struct{}{}:
				default:
				}
			}
			helperMu.Unlock()
		}
	}()

	var (
		mu      sync.Mutex
		last    = map[string]int{}  // highest n finished per device (by these consumers)
		busy    = map[string]bool{} // a handler is on the device now
		done    = map[telem]bool{}
		reqs    int
		touches int
		errs    []string
	)
	fail := func(format string, args ...any) {
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	handler := nsq.HandlerFunc(func(m *nsq.Message) error {
		var v telem
		if err := json.Unmarshal(m.Body, &v); err != nil {
			mu.Lock()
			fail("bad body %q", m.Body)
			mu.Unlock()
			return nil
		}
		mu.Lock()
		if busy[v.Device] {
			fail("device %s: two messages at once (%d)", v.Device, v.N)
		}
		busy[v.Device] = true
		// Every 97th message of a device is requeued on its first attempt.
		requeue := m.Attempts == 1 && v.N%97 == 0
		touch := v.N%50 == 0
		mu.Unlock()
		m.DisableAutoResponse()
		if touch {
			m.Touch()
		}
		if v.N%10 == 0 {
			time.Sleep(200 * time.Microsecond) // work, while another message of the device must not come
		}
		mu.Lock()
		busy[v.Device] = false
		switch {
		case requeue:
			reqs++
			mu.Unlock()
			m.RequeueWithoutBackoff(20 * time.Millisecond)
			return nil
		case v.N <= last[v.Device]:
			fail("device %s: %d after %d (attempts %d)", v.Device, v.N, last[v.Device], m.Attempts)
		}
		if touch {
			touches++
		}
		last[v.Device] = v.N
		done[v] = true
		mu.Unlock()
		m.Finish()
		return nil
	})
	<-helperLines // the helper holds messages now
	var consumers []*nsq.Consumer
	for i := range 4 {
		cfg := nsq.NewConfig()
		cfg.MaxInFlight = 32
		cfg.LookupdPollInterval = time.Second
		c, err := nsq.NewConsumer("telemetry", "work", cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.SetLogger(nil, nsq.LogLevelError)
		c.AddConcurrentHandlers(handler, 4)
		if i == 0 {
			err = c.ConnectToNSQLookupd(fmt.Sprintf("127.0.0.1:%d", n.httpPort))
		} else {
			err = c.ConnectToNSQD(addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	defer func() {
		for _, c := range consumers {
			c.Stop()
		}
	}()
	time.Sleep(200 * time.Millisecond)
	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()

	want := devices * perDevice
	waitFor(t, "every message finished", 90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		helperMu.Lock()
		defer helperMu.Unlock()
		got := len(done)
		for k := range helperSeen {
			if !done[k] {
				got++
			}
		}
		return got >= want || len(errs) > 0
	})
	mu.Lock()
	if len(errs) > 0 {
		t.Fatalf("consumer errors: %s", strings.Join(errs, "; "))
	}
	for d := range devices {
		for i := 1; i <= perDevice; i++ {
			k := telem{fmt.Sprintf("d%03d", d), i}
			if !done[k] && !helperSeen[k] {
				t.Fatalf("message %v never finished", k)
			}
		}
	}
	mu.Unlock()
	var st nsqStatus
	waitFor(t, "server counters", 20*time.Second, func() bool {
		st = n.nsqStatus(t)
		return st.NSQ.InFlight == 0 && st.NSQ.ReqN >= uint64(reqs)
	})
	t.Logf("helper handled %d, consumers %d, REQ %d, TOUCH %d; server: %+v", len(helperSeen), len(done), reqs, touches, st.NSQ)
	if st.NSQ.RdyExceeded != 0 {
		t.Fatalf("RDY exceeded %d times", st.NSQ.RdyExceeded)
	}
	if st.NSQ.Touch < uint64(touches) || st.NSQ.Fin < uint64(len(done)) || st.NSQ.RDY > 4*32 {
		t.Fatalf("server counts: %+v (touches %d, finished %d)", st.NSQ, touches, len(done))
	}
}

// TestNSQPublishDurable: go-nsq's Publish and MultiPublish answer OK only
// once the messages are durable: SIGKILL right after the last OK, and
// after a restart a consumer gets every one.
func TestNSQPublishDurable(t *testing.T) {
	n, addr := newNSQNode(t, "groups:\n  - subject: telemetry.>\n    queue: check\n")
	n.start()
	p := nsqProducer(t, addr)
	want := map[string]bool{}
	for i := range 100 {
		body := fmt.Sprintf(`{"device":"pub-%d","i":%d}`, i%7, i)
		if err := p.Publish("telemetry", []byte(body)); err != nil {
			t.Fatal(err)
		}
		want[body] = true
	}
	var batch [][]byte
	for i := range 100 {
		body := fmt.Sprintf(`{"i":%d,"batch":true}`, i)
		batch = append(batch, []byte(body))
		want[body] = true
	}
	if err := p.MultiPublish("telemetry.batcher", batch); err != nil {
		t.Fatal(err)
	}
	n.kill()
	p.Stop()

	n.start()
	c, err := nsq.NewConsumer("telemetry", "check", nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogger(nil, nsq.LogLevelError)
	var mu sync.Mutex
	got := map[string]bool{}
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		got[string(m.Body)] = true
		mu.Unlock()
		return nil
	}))
	if err := c.ConnectToNSQD(addr); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	waitFor(t, "every published message after the restart", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	})
	for b := range want {
		if !got[b] {
			t.Fatalf("lost after an OK: %s", b)
		}
	}
}

// TestNSQTools: nsq_to_file (through nsqd's TCP address) and nsq_tail
// (found through the nsqlookupd endpoint) consume channels of edgeq and get
// every message.
func TestNSQTools(t *testing.T) {
	t.Parallel() // builds the NSQ tools while another test waits (see TestMain)
	toFile, tail := nsqTool(t, "nsq_to_file"), nsqTool(t, "nsq_tail")
	n, addr := newNSQNode(t, "groups:\n  - subject: telemetry.>\n    queue: archive\n  - subject: telemetry.>\n    queue: tail\n")
	n.start()
	p := nsqProducer(t, addr)
	publishBacklog(t, p, 10, 100)
	const total = 1000

	outDir, workDir := t.TempDir(), t.TempDir()
	tf := exec.Command(toFile, "--nsqd-tcp-address", addr, "--topic", "telemetry", "--channel", "archive",
		"--output-dir", outDir, "--work-dir", workDir, "--sync-interval", "200ms", "--log-level", "warn")
	var tfLog bytes.Buffer
	tf.Stdout, tf.Stderr = &tfLog, &tfLog
	if err := tf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tf.Process.Kill(); tf.Wait() })

	tl := exec.Command(tail, "--lookupd-http-address", fmt.Sprintf("127.0.0.1:%d", n.httpPort), "--topic", "telemetry",
		"--channel", "tail", "-n", strconv.Itoa(total))
	var tailOut, tailErr bytes.Buffer
	tl.Stdout, tl.Stderr = &tailOut, &tailErr
	if err := tl.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan error, 1)
	go func() { tailDone <- tl.Wait() }()
	select {
	case err := <-tailDone:
		if err != nil {
			t.Fatalf("nsq_tail: %v: %s", err, tailErr.String())
		}
	case <-time.After(60 * time.Second):
		tl.Process.Kill()
		t.Fatalf("nsq_tail did not get %d messages: %d lines; %s", total, bytes.Count(tailOut.Bytes(), []byte("\n")), tailErr.String())
	}
	checkLines(t, "nsq_tail", tailOut.Bytes(), total)

	deadline := time.Now().Add(60 * time.Second)
	for n.groupLag(t, "archive") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nsq_to_file did not finish every message: %+v; its log: %s", n.nsqStatus(t).NSQ, tfLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tf.Process.Signal(syscall.SIGTERM) // rotates the file into output-dir
	tf.Wait()
	files, _ := filepath.Glob(filepath.Join(outDir, "*"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if len(files) == 0 {
		t.Fatalf("nsq_to_file wrote nothing: %s", tfLog.String())
	}
	checkLines(t, "nsq_to_file", all, total)
}

// checkLines: every backlog message exactly once per device and n, each
// device in order.
func checkLines(t *testing.T, who string, out []byte, total int) {
	t.Helper()
	last := map[string]int{}
	seen := map[telem]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var v telem
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: line %q: %v", who, line, err)
		}
		if v.N <= last[v.Device] && !seen[v] {
			t.Fatalf("%s: device %s: %d after %d", who, v.Device, v.N, last[v.Device])
		}
		last[v.Device] = max(last[v.Device], v.N)
		seen[v] = true
	}
	if len(seen) != total {
		t.Fatalf("%s: %d distinct messages, want %d", who, len(seen), total)
	}
}

// TestNSQBadClients: bad frames, RDY above max_rdy_count, FIN of unknown
// IDs and a client that never reads get nsqd's errors or are closed; the
// node keeps serving and loses nothing.
func TestNSQBadClients(t *testing.T) {
	n, addr := newNSQNode(t, "groups:\n  - subject: telemetry.>\n    queue: work\n", "EDGEQ_NSQ_MAX_PENDING=64KiB",
		"EDGEQ_NSQ_MAX_MSG_SIZE=16KiB", "EDGEQ_NSQ_WRITE_DEADLINE=1s", "EDGEQ_NSQ_HEARTBEAT_INTERVAL=1s")
	n.start()
	p := nsqProducer(t, addr)
	// 2 MB, more than the socket buffers of a client that never reads.
	pad := strings.Repeat("x", 2000)
	const total = 1000
	for i := range total {
		if err := p.Publish("telemetry", fmt.Appendf(nil, `{"device":"d%02d","n":%d,"pad":%q}`, i%20, i/20+1, pad)); err != nil {
			t.Fatal(err)
		}
	}

	raw := func() (net.Conn, *bufio.Reader) {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		c.Write([]byte("  V2"))
		return c, bufio.NewReader(c)
	}
	readFrame := func(r *bufio.Reader) (int32, []byte, error) {
		for {
			var h [8]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return 0, nil, err
			}
			b := make([]byte, binary.BigEndian.Uint32(h[:4])-4)
			if _, err := io.ReadFull(r, b); err != nil {
				return 0, nil, err
			}
			if ft := int32(binary.BigEndian.Uint32(h[4:])); ft != 0 || string(b) != "_heartbeat_" {
				return ft, b, nil
			}
		}
	}
	expectErr := func(r *bufio.Reader, prefix string) {
		t.Helper()
		for {
			ft, b, err := readFrame(r)
			if err != nil {
				t.Fatalf("want %q: %v", prefix, err)
			}
			if ft == 2 || ft == 0 && string(b) == "OK" {
				continue // a message, SUB's OK
			}
			if ft != 1 || !strings.HasPrefix(string(b), prefix) {
				t.Fatalf("got frame %d %q, want error %q", ft, b, prefix)
			}
			return
		}
	}

	// A client that subscribes with a large RDY and never reads (so never
	// answers a heartbeat): closed after two heartbeat intervals, as nsqd
	// does, and the messages it held (one per device) go to the consumer
	// below.
	stuck, _ := raw()
	stuck.Write([]byte("SUB telemetry work\nRDY 2500\n"))

	c1, r1 := raw()
	c1.Write([]byte("SUB telemetry work\nRDY 1\nFIN 00000000deadbeef\n"))
	expectErr(r1, "E_FIN_FAILED FIN 00000000deadbeef failed ID not in flight")
	c1.Write([]byte("RDY 2501\n"))
	expectErr(r1, "E_INVALID RDY count 2501 out of range 0-2500")

	c2, r2 := raw()
	c2.Write([]byte("PUB telemetry\n\x00\x00\x00\x05hello"))
	expectErr(r2, "E_BAD_MESSAGE no device ID")
	c2.Write([]byte("GARBAGE\n"))
	expectErr(r2, "E_INVALID invalid command")
	c3, r3 := raw()
	c3.Write([]byte("MPUB telemetry\n\x00\x00\x00\x08\x00\x00\x00\x05\x00\x00\x00\x01"))
	expectErr(r3, "E_BAD_MESSAGE MPUB failed to read message(0) body")
	c4, r4 := raw()
	c4.Write(bytes.Repeat([]byte("x"), 4096))
	expectErr(r4, "E_INVALID command line longer")

	// A well-behaved consumer gets everything.
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 32
	c, err := nsq.NewConsumer("telemetry", "work", cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogger(nil, nsq.LogLevelError)
	var mu sync.Mutex
	got := map[telem]bool{}
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		var v telem
		_ = json.Unmarshal(m.Body, &v)
		mu.Lock()
		got[v] = true
		mu.Unlock()
		return nil
	}))
	if err := c.ConnectToNSQD(addr); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		have := len(got)
		mu.Unlock()
		if have == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the good consumer got %d of %d; server: %+v", have, total, n.nsqStatus(t).NSQ)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := n.nsqStatus(t)
	t.Logf("server: %+v", st.NSQ)
	if st.NSQ.Connections != 2 || st.NSQ.UnknownIDs < 1 || st.NSQ.RdyExceeded != 0 {
		t.Fatalf("counters: %+v", st.NSQ)
	}
	if p.Ping() != nil {
		t.Fatal("producer connection lost")
	}
}
