package mqtt

import (
	"context"
	"slices"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/bridge"
)

// startBridge builds and starts a bridge on app and stops it when the test ends.
func startBridge(t *testing.T, cfg Config, app bridge.Appender) *Bridge {
	t.Helper()
	b, err := New(cfg, "node1", app, testLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop(5 * time.Second) })
	return b
}

// pahoPublish publishes msgs with QoS 1 from one paho client, in order, and
// waits for every token.
func pahoPublish(t *testing.T, broker string, msgs []pubMsg) {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(broker).SetClientID("pub-" + t.Name()).
		SetCleanSession(true).SetAutoReconnect(false)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer c.Disconnect(250)
	toks := make([]paho.Token, 0, len(msgs))
	for _, m := range msgs {
		toks = append(toks, c.Publish(m.topic, 1, false, m.payload))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
}

// Test 1: 10,000 QoS 1 messages over 100 devices all land in the log, once
// each, every device's in publish order.
func TestBridgeStoresEveryMessageInDeviceOrder(t *testing.T) {
	mq := startMosquitto(t, brokerOptions{})
	log := openLog(t, t.TempDir())
	defer log.Close()
	b := startBridge(t, testConfig("plant1", mq.url()), log)
	waitFor(t, 10*time.Second, "bridge connected", func() bool { return b.Status().Connected })

	const devices, perDevice = 100, 100
	msgs := makeMessages(devices, perDevice)
	pahoPublish(t, mq.url(), msgs)
	waitFor(t, 60*time.Second, "10,000 stored", func() bool { return b.Status().Counters.Stored >= uint64(len(msgs)) })
	if err := b.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	st := b.Status()
	if st.Counters.Stored != uint64(len(msgs)) || st.Counters.Acked != uint64(len(msgs)) {
		t.Errorf("stored %d, acked %d, want %d each", st.Counters.Stored, st.Counters.Acked, len(msgs))
	}
	c := readLog(t, log)
	if c.records != len(msgs) {
		t.Errorf("log holds %d records, want %d", c.records, len(msgs))
	}
	if m := c.missing(msgs, allIndexes(len(msgs))); len(m) > 0 {
		t.Errorf("%d messages missing, first %v", len(m), m[0])
	}
	want := make([]int, perDevice)
	for i := range want {
		want[i] = i
	}
	for d := 0; d < devices; d++ {
		dev := deviceName(d)
		if got := c.perDev[dev]; !slices.Equal(got, want) {
			t.Fatalf("device %s: counters in log order %v, want 0..%d in order; seqs %v; status %+v", dev, got, perDevice-1, c.seqs[dev], st)
		}
		for i, s := range c.seqs[dev] {
			if s != uint64(i+1) {
				t.Fatalf("device %s: record %d has seq %d, want %d", dev, i, s, i+1)
			}
		}
		if n := c.topicHdr["sensors/"+dev+"/telemetry"]; n != perDevice {
			t.Fatalf("device %s: %d records carry its topic header, want %d", dev, n, perDevice)
		}
	}
	if c.sources["mqtt:plant1"] != len(msgs) {
		t.Errorf("sources %v, want all mqtt:plant1", c.sources)
	}
}
