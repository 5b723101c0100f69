package gateway

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/hot"
	"edgeq/wal"
)

// maxSources bounds the per-source counters (nats, http, one per bridge).
const maxSources = 256

// Ingest is the one way into the log for every source (NATS, HTTP, bridges):
// it counts by source, feeds the hot-device detector and appends. It
// implements bridge.Appender and natsserver.Ingester.
type Ingest struct {
	log    *wal.Log
	logger *slog.Logger

	hotMu sync.Mutex
	hot   *hot.Detector // nil when isolation is off
	// normal is the number of normal partitions: hot ones come after.
	normal int

	srcMu   sync.Mutex
	sources map[string]*SourceCounters // bound: maxSources
	other   SourceCounters             // sources beyond the bound

	moves, moveErrors atomic.Uint64
}

// SourceCounters count one source's appends.
type SourceCounters struct {
	Msgs, Bytes, Errors atomic.Uint64
}

func newIngest(l *wal.Log, det *hot.Detector, logger *slog.Logger) *Ingest {
	in := &Ingest{log: l, hot: det, logger: logger, sources: map[string]*SourceCounters{}, normal: l.Options().Partitions}
	if det != nil {
		for dev, home := range l.IsolatedDevices() {
			hp := l.DevicePartition(dev)
			det.Restore(dev, home, hp, l.Durable(hp))
		}
	}
	return in
}

func (in *Ingest) source(name string) *SourceCounters {
	in.srcMu.Lock()
	defer in.srcMu.Unlock()
	c, ok := in.sources[name]
	if !ok {
		if len(in.sources) >= maxSources {
			return &in.other
		}
		c = &SourceCounters{}
		in.sources[name] = c
	}
	return c
}

// AppendAsync appends rec, counting it under rec.Source.
func (in *Ingest) AppendAsync(rec *wal.Record, done func(wal.Position, error)) {
	c := in.source(rec.Source)
	size := uint64(len(rec.Payload))
	device := rec.Device
	if in.hot != nil && wal.ValidateDeviceID(device) == nil {
		in.hotMu.Lock()
		in.hot.Observe(device, in.log.HomePartition(device), time.Now())
		in.hotMu.Unlock()
	}
	in.log.AppendAsync(rec, func(pos wal.Position, err error) {
		if err != nil {
			c.Errors.Add(1)
		} else {
			c.Msgs.Add(1)
			c.Bytes.Add(size)
			if in.hot != nil && pos.Partition >= in.normal {
				// An isolated device's record: the detector counts its
				// backlog there before moving it home.
				in.hotMu.Lock()
				in.hot.Stored(device, pos.Partition, pos.Offset)
				in.hotMu.Unlock()
			}
		}
		done(pos, err)
	})
}

// Append is the synchronous form, for HTTP.
func (in *Ingest) Append(ctx context.Context, rec *wal.Record) (wal.Position, error) {
	type result struct {
		pos wal.Position
		err error
	}
	ch := make(chan result, 1)
	in.AppendAsync(rec, func(pos wal.Position, err error) { ch <- result{pos, err} })
	select {
	case r := <-ch:
		return r.pos, r.err
	case <-ctx.Done():
		return wal.Position{}, ctx.Err()
	}
}

// runHot evaluates the detector once a second and moves devices.
func (in *Ingest) runHot(ctx context.Context) {
	if in.hot == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			in.hotMu.Lock()
			// What every queue group finished of each hot partition: a
			// device moves home only once its backlog there is small.
			for p := in.normal; p < in.log.NumPartitions(); p++ {
				floor, ok := in.log.Offsets().Floor(p)
				in.hot.Committed(p, floor, ok)
			}
			moves := append([]hot.Move(nil), in.hot.Evaluate(now)...)
			in.hotMu.Unlock()
			for _, m := range moves {
				in.move(ctx, m)
			}
		}
	}
}

func (in *Ingest) move(ctx context.Context, m hot.Move) {
	target := in.log.HomePartition(m.Device)
	if m.Hot {
		target = in.log.HotPartition(m.Device)
	}
	if _, err := in.log.Move(ctx, m.Device, target); err != nil {
		in.moveErrors.Add(1)
		in.hotMu.Lock()
		in.hot.Undo(m)
		in.hotMu.Unlock()
		in.logger.Error("hot-device move failed", "device", m.Device, "err", err)
		return
	}
	in.moves.Add(1)
	in.logger.Info("hot-device isolation", "device", m.Device, "hot", m.Hot, "rate", m.Rate, "partition", target, "backlog", m.Backlog)
}

// Sources returns a copy of the per-source counters.
func (in *Ingest) Sources() map[string][3]uint64 {
	in.srcMu.Lock()
	defer in.srcMu.Unlock()
	out := make(map[string][3]uint64, len(in.sources)+1)
	for name, c := range in.sources {
		out[name] = [3]uint64{c.Msgs.Load(), c.Bytes.Load(), c.Errors.Load()}
	}
	if n := in.other.Msgs.Load() + in.other.Errors.Load(); n > 0 {
		out["other"] = [3]uint64{in.other.Msgs.Load(), in.other.Bytes.Load(), in.other.Errors.Load()}
	}
	return out
}
