package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/wal"
)

// fakeMessage is a paho.Message that records its ack.
type fakeMessage struct {
	id    int
	qos   byte
	acked *[]int
	mu    *sync.Mutex
}

func (m fakeMessage) Duplicate() bool   { return false }
func (m fakeMessage) Qos() byte         { return m.qos }
func (m fakeMessage) Retained() bool    { return false }
func (m fakeMessage) Topic() string     { return "t" }
func (m fakeMessage) MessageID() uint16 { return uint16(m.id) }
func (m fakeMessage) Payload() []byte   { return nil }
func (m fakeMessage) Ack() {
	m.mu.Lock()
	*m.acked = append(*m.acked, m.id)
	m.mu.Unlock()
}

type nopAppender struct{}

func (nopAppender) AppendAsync(_ *wal.Record, done func(wal.Position, error)) {
	done(wal.Position{}, nil)
}

// Acks go out in arrival order whatever order the appends complete in, and
// messages that are not to be acked (storage errors, QoS 0) are passed over.
func TestAcksFollowArrivalOrder(t *testing.T) {
	cfg := validConfig()
	cfg.QueueSize = 64
	b, err := New(cfg, "n", nopAppender{}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []int
	const n = 200
	items := make([]ackItem, n)
	for i := range items {
		items[i] = ackItem{idx: uint64(i), msg: fakeMessage{id: i, qos: 1, acked: &acked, mu: &mu}, ack: i%7 != 3}
		if i%11 == 5 {
			items[i].msg = fakeMessage{id: i, qos: 0, acked: &acked, mu: &mu}
		}
	}
	go b.ackLoop()
	// Complete in a shuffled order, but never more than QueueSize open at once,
	// as the slots guarantee.
	r := rand.New(rand.NewPCG(3, 4))
	for start := 0; start < n; start += cfg.QueueSize {
		chunk := slices.Clone(items[start:min(start+cfg.QueueSize, n)])
		r.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
		for _, it := range chunk {
			b.slots <- struct{}{}
			b.pending.Add(1)
			b.acks <- it
		}
		b.pending.Wait()
	}
	close(b.acks)
	<-b.ackerDone
	var want []int
	for _, it := range items {
		if it.ack && it.msg.Qos() > 0 {
			want = append(want, it.msg.(fakeMessage).id)
		}
	}
	if !slices.Equal(acked, want) {
		t.Fatalf("acks in order %v, want %v", acked, want)
	}
	if got := b.Status().Counters.Acked; got != uint64(len(want)) {
		t.Fatalf("acked counter %d, want %d", got, len(want))
	}
}

func TestLifecycle(t *testing.T) {
	// A broker that is not there: Start still succeeds (retried in the
	// background), the failure shows in Status, and Stop returns promptly.
	cfg := validConfig()
	cfg.Broker = "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.ReconnectMin, cfg.ReconnectMax = 10*time.Millisecond, 20*time.Millisecond
	b, err := New(cfg, "n", nopAppender{}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	waitFor(t, 5*time.Second, "a connection error in the status", func() bool {
		return strings.Contains(b.Status().LastError, "connection refused")
	})
	if st := b.Status(); st.Connected || st.LastErrorTime.IsZero() || st.ClientID != "edgeq-n-plant1" {
		t.Fatalf("status %+v", st)
	}
	if err := b.Stop(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(time.Second); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
	if err := b.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("Start after Stop = %v, want ErrStarted", err)
	}

	// Stop before Start is a no-op; the context ending stops a bridge.
	b2, err := New(cfg, "n", nopAppender{}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := b2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitFor(t, 5*time.Second, "stop after the context ended", func() bool {
		select {
		case <-b2.stop:
			return true
		default:
			return false
		}
	})
}

func TestStatusJSON(t *testing.T) {
	b, err := New(validConfig(), "n", nopAppender{}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	b.stats.unmappable.add(ReasonNoMatch)
	b.stats.unmappable.add(ReasonNoMatch)
	b.stats.stored.Add(3)
	out, err := json.Marshal(b.Status())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"plant1"`, `"connected":false`, `"stored":3`, `"unmappable":{"no_match":2}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status JSON %s lacks %s", out, want)
		}
	}
	if strings.Contains(string(out), "last_error") {
		t.Errorf("status JSON %s shows an empty last error", out)
	}
}

var _ paho.Message = fakeMessage{}
