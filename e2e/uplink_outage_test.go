package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stop ends the server with SIGTERM: JetStream flushes what it stored.
func (s *jsServer) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("nats-server did not stop on SIGTERM")
	}
	s.cmd = nil
}

// createStreamDup makes the stream PLANT on plant3.> with duplicate window d.
func (s *jsServer) createStreamDup(d time.Duration) {
	s.t.Helper()
	nc, err := nats.Connect(s.url(), s.connect...)
	if err != nil {
		s.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "PLANT", Subjects: []string{"plant3.>"},
		Storage: jetstream.FileStorage, Duplicates: d}); err != nil {
		s.t.Fatal(err)
	}
}

// TestUplinkNATSExactlyOnceLongOutage: the stream's duplicate window is 1 s
// and the outage 60 s. While the upstream's answers are held (a proxy
// passes the publishes, not the pub-acks), the stream stores one record of
// each device that the uplink never hears about; then the upstream server
// stops (SIGTERM) and the proxy drops its connections, for 60 s, while
// ingest goes on. When it returns, the uplink looks each device up in the
// stream before sending again what may have gone out: the stream holds
// every record exactly once, in per-device order, and the status counts
// the records found upstream.
func TestUplinkNATSExactlyOnceLongOutage(t *testing.T) {
	js := newJSServer(t)
	js.start()
	js.createStreamDup(time.Second)
	px := newHoldProxy(t, fmt.Sprintf("127.0.0.1:%d", js.port))
	n := newNode(t, uplinkYAML(px.url()))
	n.start()
	pub := newPublisher(t, n.url(), 200)
	const devices, perPhase = 20, 25
	round := 0
	phase := func() {
		for i := 0; i < perPhase; i++ {
			round++
			for d := 0; d < devices; d++ {
				dev := fmt.Sprintf("out-%02d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, round))
			}
		}
		waitFor(t, "publishes acked", 60*time.Second, func() bool { return pub.acked() == round*devices })
	}
	phase()
	waitFor(t, "the first phase upstream", 60*time.Second, func() bool { return js.streamMsgs() == perPhase*devices })
	caughtUp(t, n)

	// Answers held: the stream stores, the uplink hears nothing.
	px.hold()
	phase()
	waitFor(t, "records stored upstream, unacknowledged", 60*time.Second, func() bool { return js.streamMsgs() >= perPhase*devices+devices })
	stored := js.streamMsgs()
	if u, ok := uplinkStatus(t, n); !ok || u.LagRecords <= uint64(2*perPhase*devices)-stored {
		t.Fatalf("uplink status %+v: want a lag above %d (records stored upstream still unacknowledged)", u, uint64(2*perPhase*devices)-stored)
	}

	// The outage: the server stops, the held connections drop, 60 s pass
	// (60 times the duplicate window) while ingest goes on.
	js.stop()
	px.release()
	outage := time.Now()
	phase()
	waitFor(t, "the uplink down", 30*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.State == "down"
	})
	time.Sleep(time.Until(outage.Add(60 * time.Second)))
	js.start()

	total := uint64(round * devices)
	waitFor(t, "the backlog upstream", 180*time.Second, func() bool { return js.streamMsgs() >= total })
	waitFor(t, "the uplink to catch up", 120*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.LagRecords == 0 && u.Held == 0
	})
	msgs := js.readStream(t)
	if dupes := checkUpstream(t, pub.ackedPayloads(), msgs); dupes > 0 {
		t.Errorf("%d duplicates upstream after a %v outage with a 1 s duplicate window, want 0", dupes, 60*time.Second)
	}
	if uint64(len(msgs)) != total {
		t.Errorf("%d messages in the stream, want %d", len(msgs), total)
	}
	st := uplinkStatusFull(t, n)
	if st.AlreadyUpstream == 0 || st.UpstreamChecks == 0 {
		t.Errorf("status %+v: want records found upstream and checks counted", st)
	}
	// Bounded work: a look-up only for records that may have gone out
	// (one per device held, retried while the answers were held), never
	// one per record of the backlog.
	if st.UpstreamChecks > uint64(10*devices) {
		t.Errorf("%d upstream checks for %d devices and a backlog of %d: want a few per device", st.UpstreamChecks, devices, total)
	}
	t.Logf("%d records, %d stored before the outage, %d in the stream; %d checks, %d found upstream, %d unverified",
		total, stored, len(msgs), st.UpstreamChecks, st.AlreadyUpstream, st.Unverified)
}

type uplinkChecks struct {
	UpstreamChecks  uint64 `json:"upstream_checks"`
	AlreadyUpstream uint64 `json:"already_upstream"`
	Unverified      uint64 `json:"unverified"`
}

func uplinkStatusFull(t testing.TB, n *node) uplinkChecks {
	t.Helper()
	var st struct {
		Uplinks []uplinkChecks `json:"uplinks"`
	}
	resp, err := http.Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Uplinks) != 1 {
		t.Fatalf("%d uplinks in /v1/status", len(st.Uplinks))
	}
	return st.Uplinks[0]
}

// TestUplinkNATSPurgedStream: the stream stores a record of each device
// whose pub-ack the uplink never gets, and is then purged (an operator
// emptied it) before the connection drops. Looked up again, the stream
// holds nothing of the devices: the uplink sends those records again
// (none is taken as held), then the rest; the stream holds each record
// published since the purge, exactly once and in order.
func TestUplinkNATSPurgedStream(t *testing.T) {
	js := newJSServer(t)
	js.start()
	js.createStreamDup(time.Second)
	px := newHoldProxy(t, fmt.Sprintf("127.0.0.1:%d", js.port))
	n := newNode(t, uplinkYAML(px.url()))
	n.start()
	pub := newPublisher(t, n.url(), 200)
	const devices = 10
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			for d := 0; d < devices; d++ {
				dev := fmt.Sprintf("pg-%02d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
		}
		waitFor(t, "publishes acked", 60*time.Second, func() bool { return pub.acked() == to*devices })
	}
	publish(1, 10)
	waitFor(t, "the first records upstream", 60*time.Second, func() bool { return js.streamMsgs() == 10*devices })
	caughtUp(t, n)
	px.hold()
	publish(11, 20)
	waitFor(t, "one record of each device stored, unacknowledged", 60*time.Second, func() bool { return js.streamMsgs() >= 11*devices })
	nc, err := nats.Connect(js.url())
	if err != nil {
		t.Fatal(err)
	}
	jsc, _ := jetstream.New(nc)
	st, err := jsc.Stream(context.Background(), "PLANT")
	if err == nil {
		err = st.Purge(context.Background())
	}
	nc.Close()
	if err != nil {
		t.Fatalf("purge: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // past the duplicate window: only the look-up decides
	px.release()
	waitFor(t, "records 11..20 upstream", 60*time.Second, func() bool { return js.streamMsgs() >= 10*devices })
	waitFor(t, "the uplink to catch up", 60*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.LagRecords == 0 && u.Held == 0
	})
	msgs := js.readStream(t)
	since := map[string]pubAck{}
	for p, a := range pub.ackedPayloads() {
		if _, r, _ := strings.Cut(p, "|"); atoi(r) >= 11 {
			since[p] = a
		}
	}
	if dupes := checkUpstream(t, since, msgs); dupes > 0 {
		t.Errorf("%d duplicates upstream", dupes)
	}
	if len(msgs) != 10*devices {
		t.Errorf("%d messages in the purged stream, want %d (records 11..20 of %d devices)", len(msgs), 10*devices, devices)
	}
	st2 := uplinkStatusFull(t, n)
	t.Logf("%d in the stream after the purge; %d checks, %d found upstream", len(msgs), st2.UpstreamChecks, st2.AlreadyUpstream)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// caughtUp waits until the uplink has every record acknowledged (none
// held, no lag): a pub-ack still on its way would be held with the next.
func caughtUp(t *testing.T, n *node) {
	t.Helper()
	waitFor(t, "the uplink caught up", 60*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.LagRecords == 0 && u.Held == 0
	})
}
