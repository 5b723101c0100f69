package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUplinkNATSKillMidDrain: a backlog of 20,000 records over 100 devices
// drains to JetStream with device_window: 16 (16 of a device in flight at
// once; the default is 1) while the upstream is killed (-9) mid-drain
// and restarted: the records in flight on the lost connection fail, those
// behind them are handed back unsent, and the group resends each device
// from its oldest unfinished record. Every record is in the stream, each
// device's records first appear in publish order, no duplicates.
func TestUplinkNATSKillMidDrain(t *testing.T) {
	js := newJSServer(t)
	n := newNode(t, strings.Replace(uplinkYAML(js.url()), "    window: 256\n", "    window: 256\n    device_window: 16\n", 1))
	n.start()
	pub := newPublisher(t, n.url(), 500)
	const devices, rounds = 100, 200
	for i := 1; i <= rounds; i++ {
		for d := 0; d < devices; d++ {
			dev := fmt.Sprintf("mid-%03d", d)
			pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
		}
	}
	const total = devices * rounds
	waitFor(t, "backlog stored", 120*time.Second, func() bool { return pub.acked() == total })
	js.start()
	js.createStream()
	// Kill it while the drain is under way: some of the stream, not all.
	waitFor(t, "the drain under way", 120*time.Second, func() bool { return js.streamMsgs() >= 2000 })
	js.kill()
	upstreamBefore := 0
	if u, ok := uplinkStatus(t, n); ok {
		upstreamBefore = int(u.Acked)
	}
	time.Sleep(300 * time.Millisecond)
	js.start()
	waitFor(t, "the backlog to drain", 300*time.Second, func() bool { return js.streamMsgs() >= total })
	waitFor(t, "the uplink to catch up", 120*time.Second, func() bool {
		u, ok := uplinkStatus(t, n)
		return ok && u.LagRecords == 0 && u.Held == 0
	})
	msgs := js.readStream(t)
	if dupes := checkUpstream(t, pub.ackedPayloads(), msgs); dupes > 0 {
		t.Errorf("%d duplicates upstream, want 0 (Nats-Msg-Id dedup)", dupes)
	}
	if len(msgs) != total {
		t.Errorf("%d messages in the stream, want %d", len(msgs), total)
	}
	if upstreamBefore >= total {
		t.Logf("the drain had ended before the kill took effect (%d acked): nothing was in flight", upstreamBefore)
	}
	t.Logf("%d records, %d acked upstream before the kill, %d in the stream", total, upstreamBefore, len(msgs))
}
