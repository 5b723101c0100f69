package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// restartableMosquitto is a mosquitto with persistence that a test stops
// (SIGTERM) or kills (SIGKILL) and starts again on the same port and
// database. Each run logs everything (log_type all: every PUBLISH received,
// every autosave) to its own file, written unbuffered from stderr, so a line
// is on disk before mosquitto acts on what it logs.
type restartableMosquitto struct {
	t    *testing.T
	bin  string
	dir  string
	conf string
	port int
	runs int
	cmd  *exec.Cmd
	done chan struct{}
}

func newRestartableMosquitto(t *testing.T) *restartableMosquitto {
	m := &restartableMosquitto{t: t, bin: requireTool(t, "mosquitto", "/usr/sbin/mosquitto"), port: freePort(t), dir: t.TempDir()}
	m.conf = filepath.Join(m.dir, "mosquitto.conf")
	// user root: started as root, mosquitto otherwise drops to the
	// mosquitto user and silently fails to write its database into this
	// root-owned directory (nothing would survive even a clean stop).
	// autosave_interval 1: the shortest snapshot period, so a kill -9 loses
	// little and the log bounds it.
	conf := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
user root
persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 0
max_inflight_messages 0
log_type all
log_dest stderr
`, m.port, m.dir)
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m.cmd != nil {
			m.cmd.Process.Kill()
			<-m.done
		}
	})
	return m
}

func (m *restartableMosquitto) logPath(run int) string {
	return filepath.Join(m.dir, fmt.Sprintf("mosquitto-%d.log", run))
}

func (m *restartableMosquitto) start() {
	m.t.Helper()
	m.runs++
	logf, err := os.Create(m.logPath(m.runs))
	if err != nil {
		m.t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func() { m.cmd.Wait(); close(m.done) }()
	waitFor(m.t, "mosquitto listening", 30*time.Second, func() bool {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("probe").SetConnectTimeout(2 * time.Second))
		tok := c.Connect()
		ok := tok.WaitTimeout(5*time.Second) && tok.Error() == nil
		c.Disconnect(0)
		return ok
	})
}

// stop ends mosquitto with sig: SIGTERM saves the database on the way out;
// SIGKILL loses what arrived after the last autosave (GOTCHAS 4.4).
func (m *restartableMosquitto) stop(sig syscall.Signal) {
	m.cmd.Process.Signal(sig)
	<-m.done
	m.cmd = nil
}

func (m *restartableMosquitto) url() string { return fmt.Sprintf("tcp://127.0.0.1:%d", m.port) }

var (
	mosqSaveLine    = regexp.MustCompile(`Saving in-memory database`)
	mosqPublishLine = regexp.MustCompile(`Received PUBLISH from (\S+) \(d\d, q\d, r\d, m\d+, '([^']*)'`)
)

// mosquittoAtRisk reads the log of a mosquitto run that was killed and
// counts, per topic, the PUBLISHes of client it received after the start of
// its last complete autosave: what its snapshot may not hold; saves counts
// the autosaves that started after client's first PUBLISH. A snapshot
// holds everything received before its "Saving" line (mosquitto saves
// synchronously in its event loop), but the last line may belong to a save
// the kill interrupted, so the count starts at the one before it (or at the
// beginning of the log): an upper bound of what the kill can lose.
func mosquittoAtRisk(t *testing.T, log, client string) (atRisk map[string]int, saves int) {
	t.Helper()
	lines := strings.Split(log, "\n")
	var saveAt []int
	first := -1
	for i, l := range lines {
		if mosqSaveLine.MatchString(l) {
			saveAt = append(saveAt, i)
			if first >= 0 {
				saves++
			}
		} else if first < 0 {
			if m := mosqPublishLine.FindStringSubmatch(l); m != nil && m[1] == client {
				first = i
			}
		}
	}
	from := 0
	if len(saveAt) >= 2 {
		from = saveAt[len(saveAt)-2]
	}
	atRisk = map[string]int{}
	for _, l := range lines[from:] {
		if m := mosqPublishLine.FindStringSubmatch(l); m != nil && m[1] == client {
			atRisk[m[2]]++
		}
	}
	return atRisk, saves
}

// mqttCollector is a persistent-session subscriber that counts what it
// receives per payload.
type mqttCollector struct {
	mu    sync.Mutex
	got   map[string]int
	order []string
}

func (c *mqttCollector) handle(_ paho.Client, m paho.Message) {
	c.mu.Lock()
	c.got[string(m.Payload())]++
	c.order = append(c.order, string(m.Payload()))
	c.mu.Unlock()
}

func (c *mqttCollector) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

// connect starts a session of the subscriber (CleanSession false, the same
// client ID every time). The default handler is set before Connect: the
// broker pushes a stored session's queue right after CONNACK, before the
// subscription's route exists (GOTCHAS 4.1).
func (c *mqttCollector) connect(t *testing.T, url string) paho.Client {
	t.Helper()
	so := paho.NewClientOptions().AddBroker(url).SetClientID("cloud-worker").SetCleanSession(false).
		SetOrderMatters(true).SetAutoReconnect(true).SetConnectRetry(true).SetMaxReconnectInterval(200 * time.Millisecond).
		SetDefaultPublishHandler(c.handle)
	so.SetOnConnectHandler(func(cl paho.Client) { cl.Subscribe("plant/#", 1, c.handle) })
	sub := paho.NewClient(so)
	if tok := sub.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber: %v", tok.Error())
	}
	return sub
}

// TestUplinkMQTTRestart: records forwarded with QoS 1 to mosquitto, which
// is stopped (SIGTERM) or killed (SIGKILL) and started again mid-stream,
// with the persistent-session subscriber behind it online or away. After a
// clean stop the subscriber gets every record edgeq acked. After a kill,
// per device, what it misses must not exceed what mosquitto's own log says
// it received after its last complete autosave: edgeq sent everything again
// that mosquitto had not PUBACKed, so anything else missing is edgeq's loss.
// (Duplicates are allowed: MQTT has no message IDs; mosquitto 2.0.11 may
// reorder a session's queue, GOTCHAS 4.4: both are logged only.)
func TestUplinkMQTTRestart(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		away bool // the subscriber is disconnected across the broker's restart
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGTERM, subscriber away", syscall.SIGTERM, true},
		{"kill -9", syscall.SIGKILL, false},
		{"kill -9, subscriber away", syscall.SIGKILL, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testUplinkMQTTRestart(t, tt.sig, tt.away) })
	}
}

func testUplinkMQTTRestart(t *testing.T, sig syscall.Signal, away bool) {
	const uplinkClient = "edgeq-e2e-uplink"
	mq := newRestartableMosquitto(t)
	mq.start()
	col := &mqttCollector{got: map[string]int{}}
	sub := col.connect(t, mq.url())
	defer func() { sub.Disconnect(100) }()
	n := newNode(t, fmt.Sprintf(`uplinks:
  - name: broker
    type: mqtt
    timeout: 2s
    retry_min: 50ms
    retry_max: 500ms
    mqtt:
      broker: %s
      topic: plant/{node}/{device}
      client_id: %s
`, mq.url(), uplinkClient))
	n.start()
	pub := newPublisher(t, n.url(), 100)
	const devices = 20
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // paced rounds until stop: the broker's restart falls mid-stream
		defer close(done)
		for i := 1; ; i++ {
			for d := 0; d < devices; d++ {
				dev := fmt.Sprintf("mq-%02d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	uplinkAcked := func() uint64 {
		s, _ := uplinkStatus(t, n)
		return s.Acked
	}
	waitFor(t, "records upstream before the restart", 120*time.Second, func() bool { return col.received() >= 300 })
	if away {
		sub.Disconnect(100)
		base := uplinkAcked()
		waitFor(t, "records queued for the subscriber while it is away", 120*time.Second, func() bool { return uplinkAcked() >= base+300 })
	}
	if sig == syscall.SIGKILL {
		// Kill between autosaves of the stream, so that the log's bound is
		// less than everything.
		waitFor(t, "two autosaves of mosquitto during the stream", 120*time.Second, func() bool {
			log, _ := os.ReadFile(mq.logPath(1))
			_, saves := mosquittoAtRisk(t, string(log), uplinkClient)
			return saves >= 2
		})
	}
	mq.stop(sig)
	time.Sleep(300 * time.Millisecond)
	mq.start()
	base := uplinkAcked()
	waitFor(t, "records upstream after the restart", 120*time.Second, func() bool { return uplinkAcked() >= base+300 })
	if away {
		sub = col.connect(t, mq.url())
	}
	close(stop)
	<-done
	waitFor(t, "every publish answered", 120*time.Second, func() bool {
		return uint64(pub.acked())+pub.failed.Load() == pub.n.Load()
	})
	acked := pub.ackedPayloads()
	waitFor(t, "the uplink drained", 120*time.Second, func() bool {
		s, ok := uplinkStatus(t, n)
		return ok && s.LagRecords == 0 && s.Held == 0
	})

	// What mosquitto may have lost: nothing after a clean stop; after a
	// kill, per device, what it logged after its last complete autosave.
	bound := map[string]int{}
	if sig == syscall.SIGKILL {
		log, err := os.ReadFile(mq.logPath(1))
		if err != nil {
			t.Fatal(err)
		}
		atRisk, _ := mosquittoAtRisk(t, string(log), uplinkClient)
		for topic, k := range atRisk {
			bound[topic[strings.LastIndexByte(topic, '/')+1:]] += k
		}
	} else if fi, err := os.Stat(filepath.Join(mq.dir, "mosquitto.db")); err != nil || fi.Size() == 0 {
		t.Fatalf("mosquitto saved no database on SIGTERM: %v", err)
	}
	missing := func() map[string]int {
		col.mu.Lock()
		defer col.mu.Unlock()
		m := map[string]int{}
		for p := range acked {
			if col.got[p] == 0 {
				dev, _, _ := strings.Cut(p, "|")
				m[dev]++
			}
		}
		return m
	}
	within := func(m map[string]int) bool {
		for dev, k := range m {
			if k > bound[dev] {
				return false
			}
		}
		return true
	}
	// Deliveries to the subscriber go on after the uplink drained: poll
	// until the loss is within the bound, then hold it to the bound.
	deadline := time.Now().Add(120 * time.Second)
	m := missing()
	for !within(m) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		m = missing()
	}
	var lost, allowed int
	var over []string
	for dev := range m {
		lost += m[dev]
		if m[dev] > bound[dev] {
			over = append(over, fmt.Sprintf("%s: %d missing, mosquitto's log allows %d", dev, m[dev], bound[dev]))
		}
	}
	for _, k := range bound {
		allowed += k
	}
	sort.Strings(over)
	if len(over) > 0 {
		t.Errorf("the subscriber misses more than mosquitto can have lost:\n%s", strings.Join(over, "\n"))
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	dupes, inversions := 0, 0
	last := map[string]int{}
	seen := map[string]bool{}
	for _, p := range col.order {
		if seen[p] {
			dupes++
			continue
		}
		seen[p] = true
		dev, num, _ := strings.Cut(p, "|")
		i, _ := strconv.Atoi(num)
		if i < last[dev] {
			inversions++ // mosquitto 2.0.11 can reorder a persistent session's queue (GOTCHAS 4.4)
		}
		last[dev] = max(last[dev], i)
	}
	t.Logf("%d acked, %d received upstream, %d missing (mosquitto's log allows %d), %d duplicates, %d order inversions (broker side)",
		len(acked), len(col.order), lost, allowed, dupes, inversions)
}
