package dispatch

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/queue"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// event is an input for a group's goroutine.
type event struct {
	kind       eventKind
	member     queue.MemberID
	m          Member
	credit     int
	tok        ackToken
	ack        AckKind
	delay      time.Duration
	done       chan error // join/leave/credit answer; nil for acks
	drainUntil time.Time
}

type eventKind uint8

const (
	evJoin eventKind = iota + 1
	evLeave
	evCredit
	evAck
	evDrain
)

// fetchResult answers one queue.Fetch.
type fetchResult struct {
	partition int
	msgs      []queue.Msg
	next      uint64
}

// runner owns one queue group's core and is its only goroutine.
type runner struct {
	key      GroupKey
	gid      int
	consumer string // offset-store name
	core     *queue.Group
	log      *wal.Log
	logger   *slog.Logger
	reg      *Registry

	events  chan event // bounded; senders block when full (backpressure on acks)
	results chan fetchResult
	stop    chan struct{}
	done    chan struct{}

	members  map[queue.MemberID]Member // bound: queue.Config.MaxMembers
	fetchers map[int]*fetcher

	builder   deliveryBuilder
	rec       wal.Record
	declared  bool
	lastEmpty atomic.Int64 // unix ns when the last member left; 0 while members exist

	statsMu sync.Mutex
	stats   GroupStats

	latency *hist.Histogram
	dirty   bool // commits since the last offset flush
}

const eventQueue = 4096

func (r *runner) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flush := time.NewTicker(time.Second)
	defer flush.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	r.apply(ctx)
	for {
		if at, ok := r.core.NextDeadline(); ok {
			timer.Reset(max(time.Until(at), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case ev := <-r.events:
			r.handle(ev, time.Now())
			// Take what else is queued before acting: one Ready per batch.
			for i := 0; i < 256; i++ {
				select {
				case ev := <-r.events:
					r.handle(ev, time.Now())
					continue
				default:
				}
				break
			}
		case res := <-r.results:
			if err := r.core.Fetched(res.partition, res.msgs, res.next, time.Now()); err != nil {
				r.logger.Error("fetch answer refused", "partition", res.partition, "err", err)
			}
		case <-timer.C:
			_ = r.core.Tick(time.Now())
		case <-flush.C:
			r.flushOffsets()
			r.snapshotStats()
		case <-r.stop:
			r.flushOffsets()
			return
		}
		if r.apply(ctx) {
			r.flushOffsets()
			r.snapshotStats()
			return
		}
	}
}

func (r *runner) handle(ev event, now time.Time) {
	var err error
	switch ev.kind {
	case evJoin:
		if err = r.core.AddMember(ev.member, ev.credit, now); err == nil {
			r.members[ev.member] = ev.m
			r.lastEmpty.Store(0)
		}
	case evLeave:
		if _, ok := r.members[ev.member]; ok {
			delete(r.members, ev.member)
			err = r.core.RemoveMember(ev.member, now)
			if len(r.members) == 0 {
				r.lastEmpty.Store(now.UnixNano())
			}
		}
	case evCredit:
		err = r.core.SetCredit(ev.member, ev.credit, now)
	case evAck:
		ref := queue.Ref{Partition: ev.tok.partition, Offset: ev.tok.offset}
		id := queue.MemberID(ev.tok.member)
		switch ev.ack {
		case AckDone:
			err = r.core.Ack(id, ref, ev.tok.deliveries, now)
		case AckNak:
			err = r.core.Nak(id, ref, ev.tok.deliveries, ev.delay, now)
		case AckInProgress:
			err = r.core.InProgress(id, ref, ev.tok.deliveries, now)
		case AckTerm:
			err = r.core.Term(id, ref, ev.tok.deliveries, now)
		}
	case evDrain:
		err = r.core.Drain(ev.drainUntil, now)
	}
	if ev.done != nil {
		ev.done <- err
	}
}

// apply carries out the core's actions in the order its contract asks:
// dead letters, deliveries, fetches, commits, drained. It reports whether the
// group has drained.
func (r *runner) apply(ctx context.Context) bool {
	for r.core.HasReady() {
		rd := r.core.Ready()
		for i := range rd.DeadLetter {
			r.deadLetter(&rd.DeadLetter[i])
		}
		for i := range rd.Deliver {
			r.deliver(&rd.Deliver[i])
		}
		for _, f := range rd.Fetch {
			r.fetch(ctx, f)
		}
		for _, c := range rd.Commit {
			if err := r.log.Offsets().Commit(r.consumer, c.Partition, c.Offset); err != nil {
				r.logger.Error("commit offset", "partition", c.Partition, "err", err)
			}
			r.dirty = true
		}
		if rd.Drained {
			return true
		}
	}
	return false
}

func (r *runner) deliver(d *queue.Delivery) {
	now := time.Now()
	m, ok := r.members[d.Member]
	if !ok || wal.DecodeRecord(d.Msg.Data, &r.rec) != nil {
		// A member that left between the decision and now, or a record that
		// no longer decodes (checked at read, so not expected): hand it back.
		_ = r.core.Nak(d.Member, d.Msg.Ref(), d.Deliveries, 0, now)
		return
	}
	r.builder.reply = appendAckSubject(r.builder.reply[:0], r.gid, string(d.Member), d.Msg.Partition, d.Msg.Offset, d.Deliveries)
	dv := r.builder.build(&r.rec, d.Msg.Partition, d.Msg.Offset, d.Deliveries, nil)
	if !m.Deliver(dv) {
		// The connection cannot take it (slow or closing): the member is
		// treated as failed, so everything it holds goes to others.
		delete(r.members, d.Member)
		_ = r.core.RemoveMember(d.Member, now)
		if len(r.members) == 0 {
			r.lastEmpty.Store(now.UnixNano())
		}
		r.reg.counters.refusedDeliveries.Add(1)
		return
	}
	if d.Deliveries == 1 {
		r.latency.Observe(time.Duration(now.UnixNano() - r.rec.Time))
	}
}

func (r *runner) deadLetter(dl *queue.DeadLetter) {
	if wal.DecodeRecord(dl.Msg.Data, &r.rec) != nil {
		return
	}
	r.builder.reply = r.builder.reply[:0]
	extra := []wal.Header{{Key: HeaderReason, Value: dl.Reason.String()}, {Key: HeaderGroup, Value: r.key.Queue}}
	dv := r.builder.build(&r.rec, dl.Msg.Partition, dl.Msg.Offset, dl.Deliveries, extra)
	if r.reg.publish != nil {
		r.reg.publish(DLQPrefix+r.key.Queue, dv.Header, dv.Payload)
	}
	r.logger.Warn("message dead-lettered", "device", r.rec.Device, "seq", r.rec.Seq,
		"partition", dl.Msg.Partition, "offset", dl.Msg.Offset, "reason", dl.Reason.String(), "deliveries", dl.Deliveries)
}

func (r *runner) fetch(ctx context.Context, f queue.Fetch) {
	if f.End {
		// deliver: new — start after what is stored now.
		r.results <- fetchResult{partition: f.Partition, next: r.log.Durable(f.Partition) + 1}
		return
	}
	fe, ok := r.fetchers[f.Partition]
	if !ok {
		fe = newFetcher(r.log, f.Partition, r.results, r.logger)
		r.fetchers[f.Partition] = fe
		go fe.run(ctx)
	}
	fe.requests <- f
}

func (r *runner) flushOffsets() {
	if !r.dirty {
		return
	}
	if err := r.log.Offsets().Flush(); err != nil {
		r.logger.Error("flush offsets", "err", err)
		return
	}
	r.dirty = false
}

func (r *runner) snapshotStats() {
	s := r.core.Stats()
	r.statsMu.Lock()
	r.stats.Key = r.key
	r.stats.Declared = r.declared
	r.stats.Core = s
	r.stats.Latency = r.latency.Snapshot()
	r.statsMu.Unlock()
}

// send queues an event, waiting while the group is busy; it gives up when
// the group has stopped.
func (r *runner) send(ev event) error {
	select {
	case r.events <- ev:
	case <-r.done:
		return ErrGroupStopped
	}
	if ev.done == nil {
		return nil
	}
	select {
	case err := <-ev.done:
		return err
	case <-r.done:
		return ErrGroupStopped
	}
}

func newRand() *rand.PCG {
	return rand.NewPCG(rand.Uint64(), rand.Uint64())
}
