package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

type pubAck struct {
	Node      string `json:"node"`
	Partition int    `json:"partition"`
	Offset    uint64 `json:"offset"`
	Seq       uint64 `json:"seq"`
	Error     string `json:"error"`
}

// publisher publishes telemetry with pub-acks, many outstanding at once.
type publisher struct {
	t      testing.TB
	nc     *nats.Conn
	inbox  string
	window chan struct{}
	mu     sync.Mutex
	acks   map[string]pubAck // reply token -> ack
	sent   map[string]string // reply token -> payload
	n      atomic.Uint64
	failed atomic.Uint64
}

func newPublisher(t testing.TB, url string, window int) *publisher {
	t.Helper()
	nc, err := nats.Connect(url, publisherOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return newPublisherOn(t, nc, window)
}

func publisherOptions() []nats.Option {
	return []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond), nats.ReconnectBufSize(64 << 20)}
}

// newPublisherOn publishes over nc (closed at cleanup).
func newPublisherOn(t testing.TB, nc *nats.Conn, window int) *publisher {
	t.Helper()
	p := &publisher{t: t, nc: nc, inbox: nats.NewInbox(), window: make(chan struct{}, window),
		acks: map[string]pubAck{}, sent: map[string]string{}}
	_, err := nc.Subscribe(p.inbox+".*", func(m *nats.Msg) {
		var a pubAck
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Error != "" {
			p.failed.Add(1)
		} else {
			p.mu.Lock()
			if _, dup := p.acks[m.Subject]; !dup {
				p.acks[m.Subject] = a
				select {
				case <-p.window:
				default:
				}
			}
			p.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return p
}

// publish sends one message; it blocks while the window is full.
func (p *publisher) publish(device, payload string) {
	p.window <- struct{}{}
	token := fmt.Sprintf("%s.%d", p.inbox, p.n.Add(1))
	p.mu.Lock()
	p.sent[token] = payload
	p.mu.Unlock()
	if err := p.nc.PublishMsg(&nats.Msg{Subject: "telemetry." + device, Reply: token, Data: []byte(payload)}); err != nil {
		p.t.Errorf("publish: %v", err)
	}
}

func (p *publisher) acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acks)
}

// ackedPayloads returns the payloads the node acknowledged, with their acks.
func (p *publisher) ackedPayloads() map[string]pubAck {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]pubAck, len(p.acks))
	for token, a := range p.acks {
		out[p.sent[token]] = a
	}
	return out
}

// tracker checks what workers see: per-device order of first deliveries and
// never two messages of one device in a worker's hands at once.
type tracker struct {
	t        testing.TB
	mu       sync.Mutex
	inFlight map[string]inFlight
	lastSeq  map[string]uint64 // "<node>/<device>": a device's order is per ingesting node
	seen     map[string]int    // payload -> deliveries
	byWorker map[string]int
	problems int
	// unflagged counts first deliveries (Edgeq-Deliveries: 1) of a message
	// a worker had seen before that do not say Edgeq-Redelivered: maybe;
	// flagged those that do.
	unflagged, flagged int
	// epoch counts node crashes: a crash forgets what was in flight, so a
	// message a worker still holds from before it may be delivered again.
	epoch int
	// crashes: ack errors while the node is down are expected.
	crashes bool
	// ackWait is the node's queue.ack_wait (0: unknown). A message held
	// longer than that may be redelivered while its first worker still has
	// it (ARCHITECTURE.md: "not acked within ack_wait is redelivered"): that
	// is not two messages of a device in flight. expired counts such
	// overlaps; they are logged, not failed.
	ackWait time.Duration
	expired int
}

type inFlight struct {
	worker  string
	epoch   int
	seq     uint64
	reply   string
	entered time.Time
}

// crashed starts a new epoch (call it when the node is killed).
func (tr *tracker) crashed() {
	tr.mu.Lock()
	tr.epoch++
	tr.crashes = true
	tr.mu.Unlock()
}

func newTracker(t testing.TB) *tracker {
	return &tracker{t: t, inFlight: map[string]inFlight{}, lastSeq: map[string]uint64{}, seen: map[string]int{}, byWorker: map[string]int{}}
}

// withAckWait tells the tracker the node's ack_wait (see tracker.ackWait).
func (tr *tracker) withAckWait(d time.Duration) *tracker {
	tr.ackWait = d
	return tr
}

func (tr *tracker) fail(format string, args ...any) {
	tr.problems++
	if tr.problems <= 10 {
		tr.t.Errorf(format, args...)
	}
}

func (tr *tracker) enter(worker string, m *nats.Msg) (device string, seq uint64) {
	device = m.Header.Get("Edgeq-Device")
	seq, _ = strconv.ParseUint(m.Header.Get("Edgeq-Seq"), 10, 64)
	stream := m.Header.Get("Edgeq-Node") + "/" + device
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := time.Now()
	if holder, busy := tr.inFlight[device]; busy && holder.epoch == tr.epoch && tr.ackWait > 0 && now.Sub(holder.entered) >= tr.ackWait {
		// The node sent the holder's message no later than the holder's
		// handler began, so its ack_wait has certainly run out: a
		// redelivery, or the device's next message after one, is allowed.
		tr.expired++
		if tr.expired <= 5 {
			tr.t.Logf("device %s: seq %d at %s while %s has held seq %d for %v, beyond ack_wait %v (a redelivery, not an overlap)",
				device, seq, worker, holder.worker, holder.seq, now.Sub(holder.entered).Round(time.Millisecond), tr.ackWait)
		}
	} else if busy && holder.epoch == tr.epoch {
		tr.fail("%s device %s: seq %d (delivery %s, %s) at %s while %s holds seq %d (%s)", time.Now().Format("15:04:05.000"),
			device, seq, m.Header.Get("Edgeq-Deliveries"), m.Reply, worker, holder.worker, holder.seq, holder.reply)
	}
	tr.inFlight[device] = inFlight{worker: worker, epoch: tr.epoch, seq: seq, reply: m.Reply, entered: now}
	payload := string(m.Data)
	if tr.seen[payload] == 0 {
		if seq <= tr.lastSeq[stream] {
			tr.fail("device %s: first delivery of seq %d after seq %d", stream, seq, tr.lastSeq[stream])
		}
		tr.lastSeq[stream] = seq
	}
	if m.Header.Get("Edgeq-Deliveries") == "1" && tr.seen[payload] > 0 {
		if m.Header.Get("Edgeq-Redelivered") == "maybe" {
			tr.flagged++
		} else {
			tr.unflagged++
		}
	}
	tr.seen[payload]++
	tr.byWorker[worker]++
	return device, seq
}

// lastOf is the highest first-delivered seq of device from any node.
func (tr *tracker) lastOf(device string) uint64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var last uint64
	for stream, seq := range tr.lastSeq {
		if strings.HasSuffix(stream, "/"+device) {
			last = max(last, seq)
		}
	}
	return last
}

func (tr *tracker) exit(device string) {
	tr.mu.Lock()
	delete(tr.inFlight, device)
	tr.mu.Unlock()
}

func (tr *tracker) distinct() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.seen)
}

// startWorker joins the queue group; each message is handled (enter, work,
// exit) and then acked.
func startWorker(t testing.TB, url, name string, tr *tracker, work func()) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	startWorkerOn(t, nc, "workers", name, tr, work)
	return nc
}

// startWorkerOn joins queue on nc.
func startWorkerOn(t testing.TB, nc *nats.Conn, queue, name string, tr *tracker, work func()) {
	t.Helper()
	_, err := nc.QueueSubscribe("telemetry.>", queue, func(m *nats.Msg) {
		device, _ := tr.enter(name, m)
		work()
		tr.exit(device)
		if err := m.Ack(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			tr.mu.Lock()
			expected := tr.crashes
			tr.mu.Unlock()
			if !expected {
				t.Errorf("%s: ack: %v", name, err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func randomDelay(maxMicros int) func() {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	return func() {
		mu.Lock()
		d := time.Duration(rng.IntN(maxMicros)) * time.Microsecond
		mu.Unlock()
		time.Sleep(d)
	}
}

func TestQueueGroupManyWorkers(t *testing.T) {
	n := newNode(t, "")
	n.start()
	tr := newTracker(t)
	for i := 0; i < 4; i++ {
		startWorker(t, n.url(), fmt.Sprintf("w%d", i), tr, randomDelay(1500))
	}
	const devices, per = 200, 100
	var wg sync.WaitGroup
	pubs := make([]*publisher, 4)
	for g := range pubs {
		pubs[g] = newPublisher(t, n.url(), 1000)
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 1; i <= per; i++ {
				for d := g; d < devices; d += len(pubs) {
					dev := fmt.Sprintf("sensor-%03d", d)
					pubs[g].publish(dev, fmt.Sprintf("%s|%d", dev, i))
				}
			}
		}(g)
	}
	wg.Wait()
	waitFor(t, "20,000 pub-acks", 60*time.Second, func() bool {
		total, failed := 0, uint64(0)
		for _, p := range pubs {
			total += p.acked()
			failed += p.failed.Load()
		}
		if failed > 0 {
			t.Fatalf("%d publishes refused", failed)
		}
		return total == devices*per
	})
	waitFor(t, "every message delivered", 120*time.Second, func() bool { return tr.distinct() == devices*per })
	// Per-device order of first deliveries equals publish order: the payload
	// counter follows the sequence number.
	for _, p := range pubs {
		for payload, a := range p.ackedPayloads() {
			i, _ := strconv.Atoi(payload[strings.IndexByte(payload, '|')+1:])
			if a.Seq != uint64(i) {
				t.Fatalf("%s acked with seq %d", payload, a.Seq)
			}
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.byWorker) != 4 {
		t.Fatalf("work by worker %v", tr.byWorker)
	}
	t.Logf("deliveries by worker %v", tr.byWorker)
}

func TestAckTokensAndRedelivery(t *testing.T) {
	// The in-progress message is worked on for twice ack_wait with a
	// heartbeat every sixth of it: a redelivery then means the heartbeats
	// do not work, not that a loaded machine delayed one (with ack_wait 1s
	// and a heartbeat every 500ms, a 500ms stall was enough).
	const ackWait = 3 * time.Second
	n := newNode(t, fmt.Sprintf("queue:\n  ack_wait: %s\n  max_deliver: 3\n", ackWait))
	n.start()
	wpiDone, wpiOnce := make(chan struct{}), sync.Once{}
	type seen struct {
		worker     string
		deliveries string
	}
	var mu sync.Mutex
	got := map[string][]seen{}
	handler := func(worker string) nats.MsgHandler {
		return func(m *nats.Msg) {
			mu.Lock()
			got[string(m.Data)] = append(got[string(m.Data)], seen{worker, m.Header.Get("Edgeq-Deliveries")})
			first := len(got[string(m.Data)]) == 1
			mu.Unlock()
			switch string(m.Data) {
			case "timeout":
				if first {
					return // never acked: ack_wait redelivers it elsewhere
				}
			case "nak":
				if first {
					m.NakWithDelay(100 * time.Millisecond)
					return
				}
			case "wpi":
				go func() {
					for i := 0; i < 12; i++ {
						time.Sleep(ackWait / 6)
						m.InProgress()
					}
					m.Ack()
					wpiOnce.Do(func() { close(wpiDone) }) // a redelivery (the failure below) runs this again
				}()
				return
			case "term":
				m.Term()
				return
			}
			m.Ack()
		}
	}
	for _, w := range []string{"a", "b"} {
		nc, err := nats.Connect(n.url())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.QueueSubscribe("telemetry.*", "q", handler(w)); err != nil {
			t.Fatal(err)
		}
		nc.Flush()
	}
	dlq, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	dead, _ := dlq.SubscribeSync("$EQ.DLQ.q")
	dlq.Flush()
	pub, _ := nats.Connect(n.url())
	defer pub.Close()
	for i, p := range []string{"timeout", "nak", "wpi", "term", "plain"} {
		if _, err := pub.Request(fmt.Sprintf("telemetry.d%d", i), []byte(p), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	m, err := dead.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal("no dead letter:", err)
	}
	if string(m.Data) != "term" || m.Header.Get("Edgeq-Dead-Reason") != "term" {
		t.Fatalf("dead letter %q %v", m.Data, m.Header)
	}
	waitFor(t, "redeliveries", 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["timeout"]) >= 2 && len(got["nak"]) >= 2 && len(got["plain"]) >= 1
	})
	select { // past the in-progress message's life
	case <-wpiDone:
	case <-time.After(2 * time.Minute):
		t.Fatal("the in-progress worker did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	if ds := got["timeout"]; ds[1].deliveries != "2" || ds[0].worker == ds[1].worker {
		t.Fatalf("ack_wait redelivery %+v: want Edgeq-Deliveries 2 at the other worker", ds)
	}
	if ds := got["nak"]; ds[1].deliveries != "2" {
		t.Fatalf("nak redelivery %+v", ds)
	}
	if ds := got["wpi"]; len(ds) != 1 {
		t.Fatalf("in-progress message was redelivered: %+v", ds)
	}
	if ds := got["term"]; len(ds) != 1 {
		t.Fatalf("terminated message was redelivered: %+v", ds)
	}
}
