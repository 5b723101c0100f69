package serial

import (
	"fmt"
	"log/slog"
	"time"

	"edgeq/wal"
)

// retainPayload is the largest payload buffer kept for reuse: larger ones
// are left to the collector so idle memory stays at most MaxPending × this.
const retainPayload = 1024

// pending is one record in flight and its completion callback, allocated
// once and reused.
type pending struct {
	rec  wal.Record
	port *Port
	done func(wal.Position, error) // bound to complete once, no closure per append
}

// handleFrame stores one frame, or counts why it is dropped. frame is valid
// only during the call.
func (p *Port) handleFrame(frame []byte, drop DropReason) {
	p.framesIn.Add(1)
	if drop != dropNone {
		p.drop(drop, nil, nil)
		return
	}
	pr := p.take()
	if pr == nil {
		p.drop(DropShutdown, nil, frame)
		return
	}
	device, payload, reason, err := p.dec.decode(frame, pr.rec.Payload[:0])
	pr.rec.Payload = payload
	if reason != dropNone {
		p.give(pr)
		p.drop(reason, err, frame)
		return
	}
	pr.rec.Device = device
	pr.rec.Source = p.source
	pr.rec.Headers = p.headers
	pr.rec.NoWait = true // a serial line acknowledges nobody: it rides on the next commit round
	p.outstanding.Add(1)
	p.app.AppendAsync(&pr.rec, pr.done)
}

// take returns a free record, waiting while MaxPending appends are
// outstanding. It returns nil when the port is stopping and none is free.
func (p *Port) take() *pending {
	select {
	case pr := <-p.free:
		return pr
	default:
	}
	if p.created < p.cfg.MaxPending {
		p.created++
		pr := &pending{port: p}
		pr.done = pr.complete
		return pr
	}
	p.storageWaits.Add(1)
	select {
	case pr := <-p.free:
		return pr
	case <-p.ctx.Done():
		return nil
	}
}

// give puts pr back on the free list; it never blocks (there are at most
// MaxPending records and the list holds MaxPending).
func (p *Port) give(pr *pending) {
	payload := pr.rec.Payload[:0]
	if cap(payload) > retainPayload {
		payload = nil
	}
	pr.rec = wal.Record{Payload: payload}
	p.free <- pr
}

// complete runs on a log writer goroutine after group commit: count, log
// (rate-limited) and recycle. It must not block.
func (pr *pending) complete(_ wal.Position, err error) {
	p := pr.port
	if err != nil {
		p.storageErrors.Add(1)
		if ok, suppressed := p.errLog.Allow(time.Now()); ok {
			p.logger.Error("frame lost: storing it failed", "device", pr.rec.Device,
				"err", err, "similar_errors_suppressed", suppressed)
		}
	} else {
		p.stored.Add(1)
	}
	p.give(pr)
	p.outstanding.Add(-1)
}

// drop counts a dropped frame and logs it with its start: a warning at most
// every logEvery (a noisy line would flood the log), debug otherwise.
func (p *Port) drop(reason DropReason, err error, frame []byte) {
	p.dropped.add(reason)
	if ok, suppressed := p.dropLog.Allow(time.Now()); ok {
		p.logger.Warn("frame dropped", "reason", reason.String(), "err", err, "frame", preview(frame),
			"drops_not_logged", suppressed)
		return
	}
	if p.logger.Enabled(p.ctx, slog.LevelDebug) {
		p.logger.Debug("frame dropped", "reason", reason.String(), "err", err, "frame", preview(frame))
	}
}

// preview is the start of a frame, quoted, for logs.
func preview(frame []byte) string {
	const n = 64
	if len(frame) > n {
		return fmt.Sprintf("%q...", frame[:n])
	}
	return fmt.Sprintf("%q", frame)
}
