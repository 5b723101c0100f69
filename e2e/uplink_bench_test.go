package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkUplinkDrain: a backlog of records stored by edgeq (published
// while no uplink was configured) drains to a local JetStream when the node
// restarts with the uplink, side by side with nats.go PublishAsync of the
// same messages (same size, same Nats-Msg-Id scheme) into the same stream.
// Rates are the stream's first-to-last message time.
//
//	go test -run '^$' -bench UplinkDrain -benchtime 1x ./e2e
func BenchmarkUplinkDrain(b *testing.B) {
	for _, devices := range []int{100, 1000} {
		b.Run(fmt.Sprintf("devices-%d", devices), func(b *testing.B) { benchUplinkDrain(b, devices) })
	}
}

func benchUplinkDrain(b *testing.B, devices int) {
	const total, size = 50000, 100
	js := newJSServer(b)
	js.start()
	js.createStream()
	n := newNode(b, "")
	n.start()
	pub := newPublisher(b, n.url(), 1000)
	payload := strings.Repeat("x", size)
	for i := 0; i < total; i++ {
		pub.publish(fmt.Sprintf("b-%04d", i%devices), payload)
	}
	waitFor(b, "backlog stored", 120*time.Second, func() bool { return pub.acked() == total })
	n.stop()
	n.config = writeTemp(b, fmt.Sprintf("uplinks:\n  - name: cloud\n    type: nats\n    window: 1024\n    nats: {url: %q, subject: 'plant3.{device}'}\n", js.url()))
	start := time.Now()
	n.start()
	waitFor(b, "backlog drained", 300*time.Second, func() bool { return js.streamMsgs() >= total })
	wall := time.Since(start)
	uplinkRate := streamRate(b, js)

	nc, err := nats.Connect(js.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	jsc, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	st, _ := jsc.Stream(context.Background(), "PLANT")
	if err := st.Purge(context.Background()); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < total; i++ {
		m := nats.NewMsg(fmt.Sprintf("plant3.b-%04d", i%devices))
		m.Data = []byte(payload)
		if _, err := jsc.PublishMsgAsync(m, jetstream.WithMsgID("bench:"+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-jsc.PublishAsyncComplete():
	case <-time.After(120 * time.Second):
		b.Fatal("PublishAsync did not complete")
	}
	plainRate := streamRate(b, js)
	b.ReportMetric(uplinkRate, "uplink_msgs/s")
	b.ReportMetric(plainRate, "publishasync_msgs/s")
	b.ReportMetric(uplinkRate/plainRate, "ratio")
	b.Logf("%d records of %d B over %d devices: uplink %.0f msgs/s (wall %v incl. start), PublishAsync %.0f msgs/s, ratio %.2f",
		total, size, devices, uplinkRate, wall, plainRate, uplinkRate/plainRate)
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

func writeTemp(tb testing.TB, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
