package mqtt

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"edgeq/wal"
)

// Test 5: more unmappable messages than mosquitto's in-flight window (20) come
// first; they are acked and counted by reason, the valid ones behind them are
// all stored, and a new session with the same client ID gets none of them again.
func TestUnmappableMessagesAreAckedAndDoNotStall(t *testing.T) {
	tests := []struct {
		name   string
		device DeviceConfig
		topics []string
		bad    []pubMsg
		valid  func(i int) pubMsg
		want   map[Reason]uint64
	}{
		{
			name:   "topic template",
			device: DeviceConfig{Topic: "sensors/{device}/telemetry"},
			topics: []string{"sensors/#"},
			bad: repeat(15, pubMsg{topic: "sensors/dev-001/other", payload: []byte("x")},
				pubMsg{topic: "sensors/" + strings.Repeat("d", 129) + "/telemetry", payload: []byte("x")},
				pubMsg{topic: "sensors/bad device/telemetry", payload: []byte("x")}),
			valid: func(i int) pubMsg {
				dev := deviceName(i % 10)
				return pubMsg{topic: "sensors/" + dev + "/telemetry", payload: makePayload(dev, i, 100)}
			},
			want: map[Reason]uint64{ReasonNoMatch: 15, ReasonBadDeviceID: 30},
		},
		{
			name:   "json field",
			device: DeviceConfig{JSONField: "meta.device"},
			topics: []string{"json/#"},
			bad: repeat(8, pubMsg{topic: "json/a", payload: []byte(`{"meta": {"device": "dev-001"`)},
				pubMsg{topic: "json/a", payload: []byte(`{"meta": {}}`)},
				pubMsg{topic: "json/a", payload: []byte(`{"meta": {"device": true}}`)},
				pubMsg{topic: "json/a", payload: []byte(`{"meta": {"device": "a b"}}`)}),
			valid: func(i int) pubMsg {
				dev := deviceName(i % 10)
				return pubMsg{topic: "json/x", payload: []byte(fmt.Sprintf(`{"meta":{"device":%q},"device":%q,"n":%d}`, dev, dev, i))}
			},
			want: map[Reason]uint64{ReasonBadJSON: 8, ReasonMissingField: 8, ReasonFieldType: 8, ReasonBadDeviceID: 8},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mq := startMosquitto(t, brokerOptions{maxInflight: 20})
			log := openLog(t, t.TempDir())
			defer log.Close()
			cfg := testConfig("bad", mq.url())
			cfg.Device, cfg.Topics = tt.device, tt.topics
			b := startBridge(t, cfg, log)
			waitFor(t, 10*time.Second, "connected", func() bool { return b.Status().Connected })

			const valid = 100
			msgs := append([]pubMsg(nil), tt.bad...)
			for i := 0; i < valid; i++ {
				msgs = append(msgs, tt.valid(i))
			}
			pahoPublish(t, mq.url(), msgs)
			waitFor(t, 20*time.Second, "valid messages stored", func() bool { return b.Status().Counters.Stored >= valid })
			// Every PUBACK handed to paho before the session ends, so the
			// broker has them (on a loaded machine Stop could come first).
			waitFor(t, 20*time.Second, "every message acked", func() bool { return b.Status().Counters.Acked >= uint64(len(msgs)) })
			time.Sleep(200 * time.Millisecond) // paho writes the last PUBACKs
			if err := b.Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			st := b.Status().Counters
			if !maps.Equal(st.Unmappable, tt.want) {
				t.Errorf("unmappable %v, want %v", st.Unmappable, tt.want)
			}
			if st.Stored != valid || st.Acked != uint64(len(msgs)) || st.Deferred != 0 {
				t.Errorf("stored %d acked %d deferred %d, want %d, %d, 0", st.Stored, st.Acked, st.Deferred, valid, len(msgs))
			}
			if c := readLog(t, log); c.records != valid {
				t.Errorf("log holds %d records, want %d", c.records, valid)
			}

			// The broker was told: a new session with the same client ID gets
			// only a new message, none of the bad ones again. The broker sends
			// unacked messages first, so once the new one is stored, any
			// redelivery would have been counted.
			b2 := startBridge(t, cfg, log)
			pahoPublish(t, mq.url(), []pubMsg{tt.valid(valid)})
			waitFor(t, 10*time.Second, "sentinel stored", func() bool { return b2.Status().Counters.Stored == 1 })
			if err := b2.Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			if got := b2.Status().Counters; got.Received != 1 {
				t.Errorf("second session received %d messages, want only the new one (unmappable: %v)", got.Received, got.Unmappable)
			}
		})
	}
}

// Records the log refuses for good (too large) are acked and counted, and do
// not hold up the messages behind them.
func TestRecordsRefusedByTheLogAreAckedAndCounted(t *testing.T) {
	mq := startMosquitto(t, brokerOptions{})
	opts := wal.DefaultOptions()
	opts.MaxRecordBytes = 1024
	log, err := wal.Open(t.TempDir(), opts, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	b := startBridge(t, testConfig("big", mq.url()), log)
	waitFor(t, 10*time.Second, "connected", func() bool { return b.Status().Connected })

	big := pubMsg{topic: "sensors/dev-001/telemetry", payload: makePayload("dev-001", 0, 2048)}
	msgs := repeat(25, big)
	for i := 1; i <= 10; i++ {
		msgs = append(msgs, pubMsg{topic: "sensors/dev-001/telemetry", payload: makePayload("dev-001", i, 100)})
	}
	pahoPublish(t, mq.url(), msgs)
	waitFor(t, 10*time.Second, "small messages stored", func() bool { return b.Status().Counters.Stored >= 10 })
	if err := b.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	st := b.Status().Counters
	if st.Rejected[ReasonTooLarge] != 25 || st.Acked != uint64(len(msgs)) || st.StorageErrors != 0 {
		t.Errorf("rejected %v acked %d storage errors %d, want too_large 25, %d, 0", st.Rejected, st.Acked, st.StorageErrors, len(msgs))
	}
}

// repeat returns n copies of each message, in turn.
func repeat(n int, ms ...pubMsg) []pubMsg {
	var out []pubMsg
	for _, m := range ms {
		for i := 0; i < n; i++ {
			out = append(out, m)
		}
	}
	return out
}
