package mqtt

import "time"

// Read throttling. mosquitto 2.0.11 does not keep to max_inflight_messages
// for an online client (measured: 721 unacked QoS 1 messages outstanding with
// a window of 20), so the queue's size alone cannot absorb a burst. While the
// queue is a quarter full, the socket is not read: TCP pushes back on the
// broker, which keeps the messages. paho's router is never blocked, and a
// pause is bounded so that a PINGRESP is still read in time; should the queue
// overflow anyway, the QoS 1/2 message is left for redelivery (onMessage).
const maxReadPause = time.Second

func (b *Bridge) throttleReads() {
	if len(b.queue) < cap(b.queue)/4 {
		return
	}
	b.stats.throttled.Add(1)
	t := time.NewTimer(maxReadPause)
	defer t.Stop()
	for len(b.queue) >= cap(b.queue)/4 {
		select {
		case <-b.drained:
		case <-t.C:
			return
		case <-b.stop:
			return
		}
	}
}
