package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The uplink drain benchmarks: a backlog of records stored by edgeq
// (published while no uplink was configured) drains upstream when the node
// restarts with an uplink, side by side in one run with a plain client
// publishing the same number of messages of the same size over the same
// devices into the same upstream. Rounds alternate (uplink, plain,
// uplink, plain, ...); each uplink round restarts the node with a new
// uplink (a new group, so the whole backlog drains again). The figures are
// the medians; the peak resident set of edgeq (VmHWM) is the highest of
// the uplink rounds.
//
//	EDGEQ_E2E_BENCH_RECORDS=200000 go test -run '^$' -bench '^BenchmarkUplinkDrain$/^devices-100$' -benchtime 1x ./e2e
//	EDGEQ_E2E_BENCH_RECORDS=200000 go test -run '^$' -bench '^BenchmarkUplinkDrainMQTT$' -benchtime 1x ./e2e
//	EDGEQ_E2E_BENCH_RECORDS=1000000 EDGEQ_E2E_BENCH_ROUNDS=1 go test -run '^$' -bench '^BenchmarkUplinkDrain$/^devices-100$' -benchtime 1x ./e2e
//
// EDGEQ_E2E_BENCH_RECORDS is the backlog (default 50000), EDGEQ_E2E_BENCH_ROUNDS
// the rounds of each side (default 3), EDGEQ_E2E_BENCH_DEVICE_WINDOW the nats
// uplink's device_window (default: the uplink's default).

const uplinkBenchSize = 100 // payload bytes

func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// BenchmarkUplinkDrain: to a local nats-server JetStream, against nats.go
// PublishAsync with 1024 acks pending (same Nats-Msg-Id scheme). Rates are
// the stream's first-to-last message time.
func BenchmarkUplinkDrain(b *testing.B) {
	for _, devices := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("devices-%d", devices), func(b *testing.B) { benchUplinkDrain(b, devices) })
	}
}

func benchUplinkDrain(b *testing.B, devices int) {
	total := benchEnvInt(b, "EDGEQ_E2E_BENCH_RECORDS", 50000)
	rounds := benchEnvInt(b, "EDGEQ_E2E_BENCH_ROUNDS", 3)
	dw := "" // the default device_window
	if v := os.Getenv("EDGEQ_E2E_BENCH_DEVICE_WINDOW"); v != "" {
		dw = fmt.Sprintf("    device_window: %d\n", benchEnvInt(b, "EDGEQ_E2E_BENCH_DEVICE_WINDOW", 1))
	}
	js := newJSServer(b)
	js.start()
	n := newNode(b, "")
	n.start()
	storeBacklog(b, n, total, devices)
	n.stop()
	var up, plain []float64
	var peak int64
	for r := range rounds {
		js.recreateStream(b)
		n.config = writeTemp(b, fmt.Sprintf("uplinks:\n  - name: cloud%d\n    type: nats\n    window: 1024\n%s    nats: {url: %q, subject: 'plant3.{device}'}\n", r, dw, js.url()))
		n.start()
		peak = max(peak, waitDrained(b, n, total, js.streamMsgs))
		n.stop()
		up = append(up, streamRate(b, js))

		js.recreateStream(b)
		plain = append(plain, publishAsyncRate(b, js, total, devices))
		b.Logf("round %d: uplink %.0f msgs/s, PublishAsync %.0f msgs/s, ratio %.2f", r+1, up[r], plain[r], up[r]/plain[r])
	}
	reportDrain(b, "publishasync", total, devices, up, plain, peak)
}

// BenchmarkUplinkDrainMQTT: to a local mosquitto with QoS 1, against a paho
// publisher with 20 PUBACKs outstanding (mosquitto_pub's default). Rates
// are a QoS 0 subscriber's first-to-last arrival time.
func BenchmarkUplinkDrainMQTT(b *testing.B) {
	devices := 100
	total := benchEnvInt(b, "EDGEQ_E2E_BENCH_RECORDS", 50000)
	rounds := benchEnvInt(b, "EDGEQ_E2E_BENCH_ROUNDS", 3)
	broker := benchMosquitto(b)
	n := newNode(b, "")
	n.start()
	storeBacklog(b, n, total, devices)
	n.stop()
	var up, plain []float64
	var peak int64
	for r := range rounds {
		sub := newArrivals(b, broker)
		n.config = writeTemp(b, fmt.Sprintf("uplinks:\n  - name: cloud%d\n    type: mqtt\n    mqtt: {broker: %q, topic: 'plant3/{device}', client_id: bench-up-%d}\n", r, broker, r))
		n.start()
		peak = max(peak, waitDrained(b, n, total, sub.count))
		n.stop()
		up = append(up, sub.rate())
		sub.close()

		sub = newArrivals(b, broker)
		pahoPublish(b, broker, total, devices, 20)
		waitFor(b, "plain messages arrived", 300*time.Second, func() bool { return sub.count() >= uint64(total) })
		plain = append(plain, sub.rate())
		sub.close()
		b.Logf("round %d: uplink %.0f msgs/s, paho %.0f msgs/s, ratio %.2f", r+1, up[r], plain[r], up[r]/plain[r])
	}
	reportDrain(b, "paho", total, devices, up, plain, peak)
}

func reportDrain(b *testing.B, base string, total, devices int, up, plain []float64, peak int64) {
	mu, mp := median(up), median(plain)
	ratios := make([]string, len(up))
	for i := range up {
		ratios[i] = fmt.Sprintf("%.2f", up[i]/plain[i])
	}
	b.ReportMetric(mu, "uplink_msgs/s")
	b.ReportMetric(mp, base+"_msgs/s")
	b.ReportMetric(mu/mp, "ratio")
	b.ReportMetric(float64(peak)/(1<<20), "peak_rss_MB")
	b.Logf("%d records of %d B over %d devices, %d rounds: uplink %.0f msgs/s, %s %.0f msgs/s (medians), ratio %.2f (rounds %s), edgeq peak VmHWM %.1f MB",
		total, uplinkBenchSize, devices, len(up), mu, base, mp, mu/mp, strings.Join(ratios, " "), float64(peak)/(1<<20))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// storeBacklog publishes total records round-robin over devices to the node
// with 1000 acks outstanding and waits until all are acknowledged (stored).
func storeBacklog(b *testing.B, n *node, total, devices int) {
	nc, err := nats.Connect(n.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	window := make(chan struct{}, 1000)
	var acked atomic.Int64
	inbox := nats.NewInbox()
	if _, err := nc.Subscribe(inbox, func(*nats.Msg) { acked.Add(1); <-window }); err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", uplinkBenchSize))
	subjects := make([]string, devices)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("telemetry.b-%04d", i)
	}
	for i := range total {
		window <- struct{}{}
		if err := nc.PublishMsg(&nats.Msg{Subject: subjects[i%devices], Reply: inbox, Data: payload}); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "backlog stored", 600*time.Second, func() bool { return acked.Load() >= int64(total) })
}

// waitDrained waits until count reaches total and returns the node's peak
// resident set (VmHWM) by then.
func waitDrained(b *testing.B, n *node, total int, count func() uint64) int64 {
	maxHeld := 0
	waitFor(b, "backlog drained", 900*time.Second, func() bool {
		if st, ok := uplinkStatus(b, n); ok {
			maxHeld = max(maxHeld, st.Held)
		}
		return count() >= uint64(total)
	})
	peak := procStatusBytes(b, n.cmd.Process.Pid, "VmHWM:")
	st, _ := uplinkStatus(b, n)
	b.Logf("uplink: sent %d, acked %d, failed %d, retried %d; at most %d held (sampled)", st.Sent, st.Acked, st.Failed, st.Retried, maxHeld)
	return peak
}

// procStatusBytes reads one kB field of /proc/<pid>/status.
func procStatusBytes(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// recreateStream deletes PLANT if it exists and creates it again: an
// empty stream with a fresh duplicate window.
func (s *jsServer) recreateStream(b *testing.B) {
	nc, err := nats.Connect(s.url(), s.connect...)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_ = js.DeleteStream(context.Background(), "PLANT")
	s.createStream()
}

// publishAsyncRate publishes total messages with nats.go PublishAsync (1024
// pending) into PLANT and returns the stream's rate.
func publishAsyncRate(b *testing.B, js *jsServer, total, devices int) float64 {
	nc, err := nats.Connect(js.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	jsc, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	payload := []byte(strings.Repeat("x", uplinkBenchSize))
	for i := range total {
		m := nats.NewMsg(fmt.Sprintf("plant3.b-%04d", i%devices))
		m.Data = payload
		if _, err := jsc.PublishMsgAsync(m, jetstream.WithMsgID("bench:"+strconv.Itoa(i)), jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-jsc.PublishAsyncComplete():
	case <-time.After(300 * time.Second):
		b.Fatal("PublishAsync did not complete")
	}
	return streamRate(b, js)
}

// streamRate is the message rate of the stream's current content.
func streamRate(b *testing.B, js *jsServer) float64 {
	nc, err := nats.Connect(js.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	jsc, _ := jetstream.New(nc)
	st, err := jsc.Stream(context.Background(), "PLANT")
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	d := info.State.LastTime.Sub(info.State.FirstTime).Seconds()
	return float64(info.State.Msgs) / max(d, 1e-6)
}

// benchMosquitto starts a mosquitto on a free port and returns its URL.
func benchMosquitto(b *testing.B) string {
	bin := requireTool(b, "mosquitto", "/usr/sbin/mosquitto")
	port := freePort(b)
	dir := b.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\nmax_inflight_messages 0\n", port)), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	waitFor(b, "mosquitto listening", 10*time.Second, func() bool {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("probe").SetConnectTimeout(time.Second))
		tok := c.Connect()
		ok := tok.WaitTimeout(2*time.Second) && tok.Error() == nil
		c.Disconnect(0)
		return ok
	})
	return url
}

// arrivals counts the messages a QoS 0 subscriber to plant3/# gets and
// when the first and the last came.
type arrivals struct {
	c           paho.Client
	mu          sync.Mutex
	n           uint64
	first, last time.Time
}

func newArrivals(b *testing.B, broker string) *arrivals {
	a := &arrivals{}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("bench-sub-%d", time.Now().UnixNano())).SetOrderMatters(false)
	a.c = paho.NewClient(o)
	if tok := a.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatalf("subscriber connect: %v", tok.Error())
	}
	tok := a.c.Subscribe("plant3/#", 0, func(paho.Client, paho.Message) {
		now := time.Now()
		a.mu.Lock()
		if a.n == 0 {
			a.first = now
		}
		a.n++
		a.last = now
		a.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatalf("subscribe: %v", tok.Error())
	}
	return a
}

func (a *arrivals) count() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func (a *arrivals) rate() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return float64(a.n) / max(a.last.Sub(a.first).Seconds(), 1e-6)
}

func (a *arrivals) close() { a.c.Disconnect(100) }

// pahoPublish publishes total QoS 1 messages over devices topics with at
// most inflight PUBACKs outstanding, as mosquitto_pub does.
func pahoPublish(b *testing.B, broker string, total, devices, inflight int) {
	o := paho.NewClientOptions().AddBroker(broker).SetClientID("bench-pub").SetCleanSession(true).SetOrderMatters(false)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatalf("publisher connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	payload := []byte(strings.Repeat("x", uplinkBenchSize))
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range total {
		sem <- struct{}{}
		tok := c.Publish(fmt.Sprintf("plant3/b-%04d", i%devices), 1, false, payload)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !tok.WaitTimeout(60*time.Second) || tok.Error() != nil {
				failed.Add(1)
			}
			<-sem
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d publishes failed", failed.Load())
	}
}

func writeTemp(tb testing.TB, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
