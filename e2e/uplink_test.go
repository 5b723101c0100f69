package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsServer is a real nats-server with JetStream, the upstream of an uplink.
type jsServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	// extra are more nats-server flags; connect, the client options of
	// the test's own connections.
	extra   []string
	connect []nats.Option
}

func newJSServer(t testing.TB) *jsServer {
	bin := requireTool(t, "nats-server", "/usr/sbin/nats-server")
	s := &jsServer{t: t, bin: bin, port: freePort(t), dir: filepath.Join(t.TempDir(), "js")}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.kill()
		}
	})
	return s
}

func (s *jsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

func (s *jsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, append([]string{"-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port)}, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.waitUp(20 * time.Second)
}

// waitUp tracks the started s.cmd and waits until JetStream answers.
func (s *jsServer) waitUp(within time.Duration) {
	s.t.Helper()
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }()
	waitFor(s.t, "nats-server up", within, func() bool {
		nc, err := nats.Connect(s.url(), s.connect...)
		if err != nil {
			return false
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_, err = js.AccountInfo(context.Background())
		return err == nil
	})
}

func (s *jsServer) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// createStream makes the stream PLANT on plant3.> (duplicate window 2m).
func (s *jsServer) createStream() {
	s.t.Helper()
	nc, err := nats.Connect(s.url(), s.connect...)
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "PLANT", Subjects: []string{"plant3.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		s.t.Fatal(err)
	}
}

// streamMsg is one message read back from the stream.
type streamMsg struct {
	subject, payload, msgID string
}

// readStream returns every message of PLANT, in stream order.
func (s *jsServer) readStream(t testing.TB) []streamMsg {
	t.Helper()
	nc, err := nats.Connect(s.url(), s.connect...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	st, err := js.Stream(ctx, "PLANT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []streamMsg
	for uint64(len(out)) < info.State.Msgs {
		b, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			out = append(out, streamMsg{subject: m.Subject(), payload: string(m.Data()), msgID: m.Headers().Get("Nats-Msg-Id")})
			n++
		}
		if n == 0 {
			t.Fatalf("stream read stalled at %d of %d", len(out), info.State.Msgs)
		}
	}
	return out
}

func (s *jsServer) streamMsgs() uint64 {
	nc, err := nats.Connect(s.url(), s.connect...)
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), "PLANT")
	if err != nil {
		return 0
	}
	info, err := st.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

func uplinkYAML(url string) string {
	return fmt.Sprintf(`queue:
  ack_wait: 5s
uplinks:
  - name: cloud
    type: nats
    window: 256
    timeout: 2s
    retry_min: 50ms
    retry_max: 1s
    nats:
      url: %s
      subject: plant3.{device}
`, url)
}

// checkUpstream compares what edgeq pub-acked with what the stream holds:
// every acked payload is there, each device's payloads first appear in
// publish order, and duplicates are counted.
func checkUpstream(t *testing.T, acked map[string]pubAck, msgs []streamMsg) (dupes int) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]int{}
	for _, m := range msgs {
		seen[m.payload]++
		if seen[m.payload] > 1 {
			dupes++
			continue
		}
		dev, n, ok := strings.Cut(m.payload, "|")
		if !ok {
			t.Fatalf("unexpected payload %q", m.payload)
		}
		if m.subject != "plant3."+dev {
			t.Fatalf("payload %q on subject %q", m.payload, m.subject)
		}
		i, _ := strconv.Atoi(n)
		if i <= last[dev] {
			t.Fatalf("device %s: %d after %d upstream (per-device order broken)", dev, i, last[dev])
		}
		last[dev] = i
		if !strings.HasPrefix(m.msgID, "e2e-node:"+dev+":") {
			t.Fatalf("Nats-Msg-Id %q of %q, want e2e-node:%s:<seq>", m.msgID, m.payload, dev)
		}
	}
	requireUpstream(t, acked, seen)
	return dupes
}

// requireUpstream fails the test unless every acked payload was seen
// upstream.
func requireUpstream(t *testing.T, acked map[string]pubAck, seen map[string]int) {
	t.Helper()
	var missing []string
	for p := range acked {
		if seen[p] == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d pub-acked messages missing upstream, e.g. %v", len(missing), len(acked), missing[:min(10, len(missing))])
	}
}

// TestUplinkNATSKills: 20,000 messages over 100 devices forwarded to a real
// JetStream while the upstream is killed (-9) and restarted, and edgeq too.
func TestUplinkNATSKills(t *testing.T) {
	js := newJSServer(t)
	js.start()
	js.createStream()
	n := newNode(t, uplinkYAML(js.url()))
	n.start()
	pub := newPublisher(t, n.url(), 200)
	const devices, total = 100, 20000
	var wg sync.WaitGroup
	var published sync.WaitGroup
	published.Add(1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer published.Done()
		for i := 1; i <= total/devices; i++ {
			for d := 0; d < devices; d++ {
				dev := fmt.Sprintf("dev-%03d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
			time.Sleep(15 * time.Millisecond) // paced, so that both kills fall mid-stream
		}
	}()
	waitFor(t, "traffic before the upstream kill", 60*time.Second, func() bool { return pub.acked() > 4000 })
	js.kill()
	time.Sleep(500 * time.Millisecond)
	js.start()
	waitFor(t, "traffic before the edgeq kill", 60*time.Second, func() bool { return pub.acked() > 10000 })
	upstreamBefore := js.streamMsgs()
	n.kill()
	before := pub.acked()
	if before >= total || upstreamBefore >= total {
		t.Fatalf("edgeq killed after the stream ended (%d acked, %d upstream): pace the publisher", before, upstreamBefore)
	}
	n.start()
	for len(pub.window) > 0 { // publishes whose ack died with the node
		select {
		case <-pub.window:
		default:
		}
	}
	// Free window slots of publishes lost with the node until done.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Second):
				for len(pub.window) > 0 {
					select {
					case <-pub.window:
					default:
					}
				}
			}
		}
	}()
	published.Wait()
	close(stop)
	wg.Wait()
	acked := pub.ackedPayloads()
	if len(acked) < total-2000 {
		t.Fatalf("only %d of %d publishes acked", len(acked), total)
	}
	waitFor(t, "the stream to hold every acked message", 120*time.Second, func() bool { return js.streamMsgs() >= uint64(len(acked)) })
	// Let the uplink catch up on anything stored but not acked to the publisher.
	time.Sleep(time.Second)
	msgs := js.readStream(t)
	dupes := checkUpstream(t, acked, msgs)
	if dupes > 0 {
		t.Errorf("%d duplicates upstream, want 0 (Nats-Msg-Id dedup)", dupes)
	}
	t.Logf("%d pub-acked (%d before the edgeq kill, %d upstream then), %d in the stream, %d duplicates", len(acked), before, upstreamBefore, len(msgs), dupes)
}

// TestUplinkNATSLateUpstream: the upstream is absent while a backlog is
// stored, then comes up: the backlog drains, in order.
func TestUplinkNATSLateUpstream(t *testing.T) {
	js := newJSServer(t)
	n := newNode(t, uplinkYAML(js.url()))
	n.start()
	pub := newPublisher(t, n.url(), 200)
	const devices, rounds = 20, 100
	for i := 1; i <= rounds; i++ {
		for d := 0; d < devices; d++ {
			dev := fmt.Sprintf("late-%02d", d)
			pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
		}
	}
	waitFor(t, "all acked", 60*time.Second, func() bool { return pub.acked() == devices*rounds })
	// While the upstream is absent: the uplink is down, its lag is the backlog.
	waitFor(t, "status showing the backlog", 30*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.State == "down" && !u.Connected && u.LagRecords == devices*rounds && u.Acked == 0 && u.Oldest > 0
	})
	js.start()
	js.createStream()
	waitFor(t, "the backlog to drain", 90*time.Second, func() bool { return js.streamMsgs() >= devices*rounds })
	msgs := js.readStream(t)
	if dupes := checkUpstream(t, pub.ackedPayloads(), msgs); dupes > 0 {
		t.Errorf("%d duplicates upstream", dupes)
	}
	waitFor(t, "status showing the drain", 30*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.State == "up" && u.Connected && u.LagRecords == 0 && u.Acked >= devices*rounds && u.Held == 0
	})
	resp, err := http.Get(n.httpURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`edgeq_uplink_acked_total{uplink="cloud",type="nats"} `, `edgeq_uplink_state{uplink="cloud",type="nats",state="up"} 1`,
		`edgeq_uplink_lag_records{uplink="cloud",type="nats"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	out, err := runCmd(edgeqBin, "status", "--http", n.httpURL())
	if err != nil || !strings.Contains(out, "UPLINK") || !strings.Contains(out, "cloud") {
		t.Errorf("edgeq status: %v\n%s", err, out)
	}
}

type uplinkStat struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Connected  bool    `json:"connected"`
	LagRecords uint64  `json:"lag_records"`
	Held       int     `json:"held"`
	Acked      uint64  `json:"acked"`
	Oldest     float64 `json:"oldest_unsent_seconds"`
	Sent       uint64  `json:"sent"`
	Failed     uint64  `json:"failed"`
	Retried    uint64  `json:"retried"`
}

func uplinkStatus(t testing.TB, n *node) (uplinkStat, bool) {
	resp, err := http.Get(n.httpURL() + "/v1/status")
	if err != nil {
		return uplinkStat{}, false
	}
	defer resp.Body.Close()
	var st struct {
		Uplinks []uplinkStat `json:"uplinks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Uplinks) != 1 {
		return uplinkStat{}, false
	}
	return st.Uplinks[0], true
}

// TestUplinkBadConfigRefused: edgeq refuses to start, naming the key.
func TestUplinkBadConfigRefused(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"uplinks: [{name: a, type: kafka}]\n", "uplinks[0].type"},
		{"uplinks: [{name: a, type: nats, nats: {url: 'nats://127.0.0.1:1', subject: 'p.{nope}'}}]\n", "uplinks[0].nats.subject"},
		{"uplinks: [{name: a, type: nats, nats: {url: 'nats://127.0.0.1:1', subject: p, creds_file: /nonexistent.creds}}]\n", "uplinks[0].nats.creds_file"},
	} {
		n := newNode(t, tt.yaml)
		cmd := exec.Command(edgeqBin, "run", "--data", n.dataDir, "--config", n.config, "--nats", "127.0.0.1:0", "--http", "127.0.0.1:0")
		for _, kv := range os.Environ() { // the harness's EDGEQ_E2E_* are not settings
			if !strings.HasPrefix(kv, "EDGEQ_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		outb, err := cmd.CombinedOutput()
		timer.Stop()
		out := string(outb)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("edgeq run with %q: err %v, output %q; want a refusal naming %s", tt.yaml, err, out, tt.want)
		}
	}
}
