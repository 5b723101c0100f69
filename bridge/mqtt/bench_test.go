package mqtt

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// BenchmarkIngestQoS1 compares, on one mosquitto in one run, the bridge's
// ingest rate (QoS 1, 150-byte payloads, 100 devices, acked after group
// commit) with mosquitto's own QoS 1 throughput to a plain paho subscriber
// (auto-ack), for mosquitto's default in-flight window and a large one. The
// two alternate in benchRounds rounds of b.N/benchRounds messages each, so
// that both see the same load on a shared machine; the reported rates and
// ratio are the medians over the rounds. ns/op is the bridge's time per
// message. Run with a fixed count, e.g.
//
//	go test -run '^$' -bench IngestQoS1 -benchtime 30000x ./bridge/mqtt
func BenchmarkIngestQoS1(b *testing.B) {
	for _, window := range []int{20, 1000} {
		b.Run(fmt.Sprintf("inflight=%d", window), func(b *testing.B) {
			b.StopTimer()
			mq := startMosquitto(b, brokerOptions{maxInflight: window})
			log := openLog(b, b.TempDir())
			defer log.Close()
			cfg := testConfig("bench", mq.url())
			cfg.Device.Topic = "bench/bridge/{device}/telemetry"
			br, err := New(cfg, "node1", log, testLogger())
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer br.Stop(5 * time.Second)
			waitFor(b, 10*time.Second, "bridge connected", func() bool { return br.Status().Connected })

			n := max(b.N/benchRounds, 1)
			var raws, bridges, ratios []float64
			for round := 0; round < benchRounds; round++ {
				raw := rawRate(b, mq, n)
				stored := br.Status().Counters.Stored
				msgs := benchMessages("bench/bridge", n)
				b.StartTimer()
				start := time.Now()
				pub := benchPublish(b, mq.url(), msgs)
				waitFor(b, 5*time.Minute, "bridge stored all", func() bool { return br.Status().Counters.Stored >= stored+uint64(n) })
				elapsed := time.Since(start)
				b.StopTimer()
				<-pub
				bridge := float64(n) / elapsed.Seconds()
				raws, bridges, ratios = append(raws, raw), append(bridges, bridge), append(ratios, bridge/raw)
			}
			if st := br.Status().Counters; st.Deferred > 0 || st.ForcedReconnects > 0 {
				b.Logf("counters: %+v", st)
			}
			b.ReportMetric(median(bridges), "bridge-msg/s")
			b.ReportMetric(median(raws), "mosquitto-msg/s")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

const benchRounds = 3

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// rawRate measures mosquitto delivering n QoS 1 messages to a plain paho
// subscriber, from the first publish to the last delivery.
func rawRate(b *testing.B, mq *mosquitto, n int) float64 {
	b.Helper()
	var got atomic.Int64
	o := paho.NewClientOptions().AddBroker(mq.url()).SetClientID(fmt.Sprintf("bench-raw-sub-%d", time.Now().UnixNano())).SetCleanSession(true).
		SetDefaultPublishHandler(func(paho.Client, paho.Message) { got.Add(1) })
	sub := paho.NewClient(o)
	if tok := sub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatalf("raw subscriber: %v", tok.Error())
	}
	defer sub.Disconnect(250)
	if tok := sub.Subscribe("bench/raw/#", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatalf("raw subscribe: %v", tok.Error())
	}
	msgs := benchMessages("bench/raw", n)
	start := time.Now()
	pub := benchPublish(b, mq.url(), msgs)
	waitFor(b, 5*time.Minute, "raw subscriber got all", func() bool { return got.Load() >= int64(n) })
	elapsed := time.Since(start)
	<-pub
	return float64(n) / elapsed.Seconds()
}

func benchMessages(prefix string, n int) []pubMsg {
	msgs := make([]pubMsg, n)
	for i := range msgs {
		dev := deviceName(i % 100)
		msgs[i] = pubMsg{topic: prefix + "/" + dev + "/telemetry", payload: makePayload(dev, i/100, 150)}
	}
	return msgs
}

// benchPublish publishes msgs with QoS 1 as fast as paho goes and returns a
// channel closed once every token completed.
func benchPublish(b *testing.B, broker string, msgs []pubMsg) <-chan struct{} {
	b.Helper()
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("bench-pub-%d", time.Now().UnixNano())).
		SetCleanSession(true)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatalf("publisher: %v", tok.Error())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Disconnect(250)
		toks := make([]paho.Token, 0, len(msgs))
		for _, m := range msgs {
			toks = append(toks, c.Publish(m.topic, 1, false, m.payload))
		}
		for _, tok := range toks {
			tok.WaitTimeout(time.Minute)
		}
	}()
	return done
}
