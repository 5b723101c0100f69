package mqtt

import (
	"slices"
	"testing"
	"time"

	"edgeq/wal"
)

// slowAppender makes every append cost delay on the caller, as slow storage
// would, so that the queue fills faster than it drains.
type slowAppender struct {
	log   *wal.Log
	delay time.Duration
}

func (s slowAppender) AppendAsync(rec *wal.Record, done func(wal.Position, error)) {
	time.Sleep(s.delay)
	s.log.AppendAsync(rec, done)
}

// A burst far larger than the queue (mosquitto does not hold back at its
// in-flight window) is absorbed by pausing socket reads: nothing overflows,
// no connection is recycled, everything is stored once and in order.
func TestBurstLargerThanTheQueueIsThrottled(t *testing.T) {
	mq := startMosquitto(t, brokerOptions{})
	log := openLog(t, t.TempDir())
	defer log.Close()
	cfg := testConfig("burst", mq.url())
	cfg.QueueSize = minQueueSize
	b := startBridge(t, cfg, slowAppender{log: log, delay: 50 * time.Microsecond})
	waitFor(t, 10*time.Second, "connected", func() bool { return b.Status().Connected })

	const devices, perDevice = 10, 300
	msgs := makeMessages(devices, perDevice)
	pahoPublish(t, mq.url(), msgs)
	waitFor(t, 60*time.Second, "all stored", func() bool { return b.Status().Counters.Stored >= uint64(len(msgs)) })
	if err := b.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	st := b.Status().Counters
	if st.ReadPauses == 0 || st.Deferred != 0 || st.ForcedReconnects != 0 || st.Stored != uint64(len(msgs)) {
		t.Errorf("read pauses %d, deferred %d, forced reconnects %d, stored %d; want > 0, 0, 0, %d",
			st.ReadPauses, st.Deferred, st.ForcedReconnects, st.Stored, len(msgs))
	}
	c := readLog(t, log)
	want := make([]int, perDevice)
	for i := range want {
		want[i] = i
	}
	for d := 0; d < devices; d++ {
		if got := c.perDev[deviceName(d)]; !slices.Equal(got, want) {
			t.Fatalf("device %d: %d records, out of order or duplicated", d, len(got))
		}
	}
}
