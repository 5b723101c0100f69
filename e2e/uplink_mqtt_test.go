package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// restartableMosquitto is a mosquitto with persistence that a test stops
// and starts again on the same port and database.
type restartableMosquitto struct {
	t    *testing.T
	bin  string
	conf string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func newRestartableMosquitto(t *testing.T) *restartableMosquitto {
	m := &restartableMosquitto{t: t, bin: requireTool(t, "mosquitto", "/usr/sbin/mosquitto"), port: freePort(t)}
	dir := t.TempDir()
	m.conf = filepath.Join(dir, "mosquitto.conf")
	os.WriteFile(m.conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\nmax_queued_messages 0\nmax_inflight_messages 0\n", m.port, dir)), 0o600)
	t.Cleanup(func() {
		if m.cmd != nil {
			m.cmd.Process.Kill()
			<-m.done
		}
	})
	return m
}

func (m *restartableMosquitto) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "-c", m.conf)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func() { m.cmd.Wait(); close(m.done) }()
	waitFor(m.t, "mosquitto listening", 10*time.Second, func() bool {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("probe").SetConnectTimeout(time.Second))
		tok := c.Connect()
		ok := tok.WaitTimeout(2*time.Second) && tok.Error() == nil
		c.Disconnect(0)
		return ok
	})
}

// stop ends mosquitto with SIGTERM: it saves its database on a clean stop
// (a kill -9 loses what it PUBACKed since the last autosave, GOTCHAS 4.4).
func (m *restartableMosquitto) stop() {
	m.cmd.Process.Signal(syscall.SIGTERM)
	<-m.done
	m.cmd = nil
}

func (m *restartableMosquitto) url() string { return fmt.Sprintf("tcp://127.0.0.1:%d", m.port) }

// TestUplinkMQTTRestart: records forwarded with QoS 1 to mosquitto, which is
// stopped and started mid-stream; a persistent-session subscriber behind it
// gets every record edgeq acked (duplicates are allowed: MQTT has no
// message IDs).
func TestUplinkMQTTRestart(t *testing.T) {
	mq := newRestartableMosquitto(t)
	mq.start()
	var mu sync.Mutex
	got := map[string]int{}
	var order []string
	so := paho.NewClientOptions().AddBroker(mq.url()).SetClientID("cloud-worker").SetCleanSession(false).
		SetOrderMatters(true).SetAutoReconnect(true).SetConnectRetry(true).SetMaxReconnectInterval(200 * time.Millisecond)
	so.SetOnConnectHandler(func(c paho.Client) {
		c.Subscribe("plant/#", 1, func(_ paho.Client, m paho.Message) {
			mu.Lock()
			got[string(m.Payload())]++
			order = append(order, string(m.Payload()))
			mu.Unlock()
		})
	})
	sub := paho.NewClient(so)
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	time.Sleep(200 * time.Millisecond)
	n := newNode(t, fmt.Sprintf(`uplinks:
  - name: broker
    type: mqtt
    timeout: 1s
    retry_min: 50ms
    retry_max: 500ms
    mqtt:
      broker: %s
      topic: plant/{node}/{device}
`, mq.url()))
	n.start()
	pub := newPublisher(t, n.url(), 100)
	const devices, rounds = 20, 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= rounds; i++ {
			for d := 0; d < devices; d++ {
				dev := fmt.Sprintf("mq-%02d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
			time.Sleep(20 * time.Millisecond) // paced, so that the restart falls mid-stream
		}
	}()
	waitFor(t, "records upstream before the restart", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 600
	})
	select {
	case <-done:
		t.Fatal("publishing ended before the broker restart: pace the publisher")
	default:
	}
	mq.stop()
	time.Sleep(300 * time.Millisecond)
	mq.start()
	<-done
	acked := pub.ackedPayloads()
	waitFor(t, "every acked record upstream", 90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p := range acked {
			if got[p] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	dupes, inversions := 0, 0
	last := map[string]int{}
	seen := map[string]bool{}
	for _, p := range order {
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
	t.Logf("%d acked, %d received upstream, %d duplicates, %d order inversions (broker side)", len(acked), len(order), dupes, inversions)
}
