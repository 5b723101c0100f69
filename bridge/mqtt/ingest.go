package mqtt

import (
	"errors"

	paho "github.com/eclipse/paho.mqtt.golang"

	"edgeq/wal"
)

// inbound is a message and the connection (epoch) it arrived on.
type inbound struct {
	msg   paho.Message
	epoch uint64
}

// maxLoggedTopic bounds the topic text in a log line.
const maxLoggedTopic = 256

// maxLimiterKeys bounds the log limiter's keys, the fixed set of reasons
// (should a caller ever pass unbounded ones).
const maxLimiterKeys = 64

// reasonQueueOverflow keys the log limiter for QoS 1/2 messages that found
// the queue full (they are deferred, not dropped).
const reasonQueueOverflow Reason = "queue_overflow"

// onMessage runs on paho's router goroutine and never blocks: it only queues.
// Socket reads pause while the queue fills (throttle.go), so QoS 1/2 messages
// find room; should one not (storage stalled for longer than a read pause),
// it is left unacked and the connection is recycled to get it again.
func (b *Bridge) onMessage(_ paho.Client, m paho.Message) {
	b.stats.received.Add(1)
	if m.Duplicate() {
		b.stats.redelivered.Add(1)
	}
	epoch := b.conns.current()
	switch {
	case !b.accepting.Load():
		b.leave(m, ReasonStopping)
		return
	case epoch <= b.failedEpoch.Load():
		b.leave(m, ReasonStoragePaused)
		return
	case m.Qos() == 0 && len(b.queue) >= cap(b.queue)/2:
		b.leave(m, ReasonQueueFull) // keep the other half for QoS 1/2
		return
	}
	select {
	case b.queue <- inbound{msg: m, epoch: epoch}:
	default:
		b.leave(m, ReasonQueueFull)
		if m.Qos() > 0 {
			if ok, n := b.limiter.Allow(reasonQueueOverflow, b.now()); ok {
				b.logger.Error("queue full of QoS 1/2 messages: the appender is stalled; recycling the connection for redelivery",
					"queue_size", cap(b.queue), "suppressed", n)
			}
			b.failEpoch(epoch) // take nothing more from this connection, to keep order
		}
	}
}

// leave neither stores nor acks m: a QoS 1/2 message stays in the broker's
// session and is redelivered on the next connection; a QoS 0 one is lost.
func (b *Bridge) leave(m paho.Message, reason Reason) {
	if m.Qos() > 0 {
		b.stats.deferred.Add(1)
		return
	}
	b.stats.dropped.add(reason)
	if ok, n := b.limiter.Allow(reason, b.now()); ok {
		b.logger.Warn("QoS 0 message dropped", "reason", reason, "topic", truncate(m.Topic()), "suppressed", n)
	}
}

// work maps and appends queued messages in arrival order. After Stop it
// appends what was queued before and returns.
func (b *Bridge) work() {
	defer close(b.workerDone)
	for {
		select {
		case in := <-b.queue:
			b.ingest(in)
			if len(b.queue) < cap(b.queue)/8 { // low-water mark: resume paused reads
				select {
				case b.drained <- struct{}{}:
				default:
				}
			}
		case <-b.stop:
			for {
				select {
				case in := <-b.queue:
					b.ingest(in)
				default:
					return
				}
			}
		}
	}
}

func (b *Bridge) ingest(in inbound) {
	m := in.msg
	if in.epoch <= b.failedEpoch.Load() {
		// A storage error on this connection: what follows it waits for the
		// redelivery too, so that a device's records keep the broker's order.
		b.leave(m, ReasonStoragePaused)
		return
	}
	b.slots <- struct{}{} // bounds the appends in flight; released by the acker
	b.pending.Add(1)
	idx := b.nextIdx
	b.nextIdx++
	device, reason := b.mapper.Device(m.Topic(), m.Payload())
	if reason != "" {
		// Acked: a redelivery would not map either, and an unacked message
		// holds a slot of the broker's in-flight window for good.
		b.stats.unmappable.add(reason)
		if ok, n := b.limiter.Allow(reason, b.now()); ok {
			b.logger.Warn("unmappable message acked and skipped", "reason", reason,
				"topic", truncate(m.Topic()), "suppressed", n)
		}
		b.acks <- ackItem{idx: idx, msg: m, ack: true}
		return
	}
	rec := &wal.Record{
		Device:  device,
		Source:  b.source,
		Headers: b.recordHeaders(m.Topic()),
		Payload: m.Payload(), // paho's buffer, untouched until done
		// QoS 0 is acked to nobody: it rides on the next commit round.
		NoWait: m.Qos() == 0,
	}
	b.app.AppendAsync(rec, func(_ wal.Position, err error) { b.appended(in, idx, err) })
}

func (b *Bridge) recordHeaders(topic string) []wal.Header {
	if b.cfg.TopicHeader == "-" {
		return b.headers
	}
	hs := make([]wal.Header, len(b.headers), len(b.headers)+1)
	copy(hs, b.headers)
	return append(hs, wal.Header{Key: b.cfg.TopicHeader, Value: topic})
}

// appended runs on the log's writer goroutine and must not block: the send
// to acks cannot block because acks has a place for every slot.
func (b *Bridge) appended(in inbound, idx uint64, err error) {
	m := in.msg
	switch {
	case err == nil:
		b.stats.stored.Add(1)
		b.bounces.Store(0)
		b.acks <- ackItem{idx: idx, msg: m, ack: true}
	case permanent(err):
		reason := rejectReason(err)
		b.stats.rejected.add(reason)
		if ok, n := b.limiter.Allow(reason, b.now()); ok {
			b.logger.Warn("record refused by the log; message acked and skipped", "reason", reason,
				"topic", truncate(m.Topic()), "err", err, "suppressed", n)
		}
		b.acks <- ackItem{idx: idx, msg: m, ack: true}
	default:
		// Not acked: the message stays in flight in the broker's session.
		// The broker does not resend it on this connection (MQTT 3.1.1
		// resends only on reconnect); unacked messages count against its
		// in-flight limit (mosquitto max_inflight_messages), past which the
		// rest waits in the session queue (max_queued_messages). So the
		// bridge takes nothing more from this connection and breaks it after
		// backoff; on the next one the broker redelivers everything unacked,
		// in order, and the bridge tries again.
		b.stats.storageErrors.Add(1)
		b.setError(err)
		if ok, n := b.limiter.Allow(ReasonStorageError, b.now()); ok {
			b.logger.Error("storage error; message left unacked for redelivery", "err", err,
				"topic", truncate(m.Topic()), "suppressed", n)
		}
		b.leave(m, ReasonStorageError)
		if m.Qos() > 0 {
			b.failEpoch(in.epoch)
		}
		b.acks <- ackItem{idx: idx, msg: m, ack: false}
	}
}

// permanent reports whether the log would refuse the record again.
func permanent(err error) bool {
	return errors.Is(err, wal.ErrTooLarge) || errors.Is(err, wal.ErrBadDeviceID) ||
		errors.Is(err, wal.ErrTooManyDevices)
}

func rejectReason(err error) Reason {
	switch {
	case errors.Is(err, wal.ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, wal.ErrTooManyDevices):
		return ReasonTooManyDevices
	}
	return ReasonBadDeviceID
}

// failEpoch stops taking messages from the connection of epoch and asks for
// it to be broken after backoff.
func (b *Bridge) failEpoch(epoch uint64) {
	for {
		cur := b.failedEpoch.Load()
		if epoch <= cur || b.failedEpoch.CompareAndSwap(cur, epoch) {
			break
		}
	}
	b.requestBounce(epoch)
}

func truncate(s string) string {
	if len(s) > maxLoggedTopic {
		return s[:maxLoggedTopic] + "…"
	}
	return s
}
