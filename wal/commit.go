package wal

import (
	"sync"
	"sync/atomic"
	"time"

	"edgeq/internal/hist"
)

// committer is the log's one commit schedule: a single goroutine for the
// whole node (not one timer per partition) decides when an fsync round runs
// and which partitions it covers. Each partition's writer goroutine drains
// its queue, encodes and writes batches to the OS (in parallel, so encoding
// and CRCs use every core) and says when it has unsynced data; in a round the
// committer orders every dirty writer to fsync what it has written and waits
// for all of them. At most SyncWorkers fsyncs run at once: few threads sit
// blocked in fsync, and on ext4 overlapping fsyncs share one journal commit,
// so a round costs about one fsync's latency rather than one per partition.
// A writer never writes while it fsyncs, so the repair after a failed write
// or fsync (GOTCHAS 1.4) stays the writer's alone.
//
// When a round starts:
//   - always: as soon as anything is written; rounds run back to back, and
//     every acknowledged record was fsynced before its ack.
//   - interval: once fsync_interval has passed since the last round started,
//     or once commit_bytes have been written since then (over all
//     partitions), or at once under load: when those bytes come at
//     commit_bytes per loadPeriod (10ms, or fsync_interval if shorter) or
//     faster (see loaded). Under load rounds therefore run back to back (a
//     windowed publisher is not held to window / interval); a trickle gets at
//     most one round per fsync_interval. The load rule's period is capped so
//     that a long fsync_interval (100ms, 1s: fewer, larger fsyncs, less
//     written per record) is not undone by a moderate stream counting as load.
//   - none: never; writers complete a batch once it is written to the OS.
type committer struct {
	parts []*partition
	opts  *Options

	wake chan struct{} // cap 1: a writer has new unsynced data
	stop chan struct{} // closed by Close once every writer has drained
	quit chan struct{} // closed by the committer when it ends: writers exit
	done chan struct{}

	syncSem    chan struct{} // bounds fsyncs in flight
	roundWG    sync.WaitGroup
	dirty      []*partition
	base       time.Time    // monotonic origin of roundStart
	roundStart atomic.Int64 // ns since base when the last round started
	arrived    atomic.Int64 // bytes written since the last round started, all partitions

	rounds       atomic.Uint64
	roundRecords atomic.Uint64
	roundBytes   atomic.Uint64
	roundTime    *hist.Histogram // wall time of an fsync round
}

// CommitStats are the counters of the log's commit schedule.
type CommitStats struct {
	Rounds       uint64 // fsync rounds
	RoundRecords uint64 // records made durable by fsync rounds
	RoundBytes   uint64 // bytes made durable by fsync rounds
	Fsyncs       uint64 // fsync calls, all partitions
	WrittenBytes uint64 // bytes written to the OS, all partitions
	RoundLatency hist.Snapshot
}

func newCommitter(parts []*partition, opts *Options) *committer {
	return &committer{
		parts:     parts,
		opts:      opts,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		syncSem:   make(chan struct{}, opts.SyncWorkers),
		base:      time.Now(),
		roundTime: hist.New(FsyncBounds),
	}
}

func (c *committer) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// wrote is called by a writer after it added n unsynced bytes; first says
// that its pending list was empty before. The committer is woken only when
// its decision may change: a partition became dirty, or the load rule holds
// (a trickle costs no wake-up per record).
func (c *committer) wrote(p *partition, n int, first bool) {
	arrived := c.arrived.Add(int64(n))
	if first {
		p.dirty.Store(true)
	}
	if first || c.loaded(arrived, time.Since(c.base)-time.Duration(c.roundStart.Load())) {
		c.kick()
	}
}

// loadPeriod caps the period of the load rule.
const loadPeriod = 10 * time.Millisecond

// loaded says whether the bytes written since the last round started
// (arrived, over since) start the next round at once, before fsync_interval:
//   - commit_bytes have arrived, whatever the time; or
//   - they come at a rate of at least commit_bytes per period, where period
//     is fsync_interval capped at loadPeriod: then rounds run back to back,
//     and a publisher with a window of W records is not held to
//     W / fsync_interval. The elapsed time counts as at least a quarter
//     period, so that a few records right after a round (a fast disk) do not
//     start another one: it takes a burst of commit_bytes / 4.
//
// Together: arrived >= commit_bytes * clamp(since / period, 1/4, 1). Below
// that (a trickle, or a moderate stream with a long fsync_interval) rounds
// come once per fsync_interval.
func (c *committer) loaded(arrived int64, since time.Duration) bool {
	if arrived >= int64(c.opts.CommitBytes) {
		return true
	}
	period := min(c.opts.FsyncInterval, loadPeriod)
	since = max(since, period/4)
	return float64(arrived)*float64(period) >= float64(c.opts.CommitBytes)*float64(since)
}

func (c *committer) anyDirty() bool {
	for _, p := range c.parts {
		if p.dirty.Load() {
			return true
		}
	}
	return false
}

func (c *committer) run() {
	defer close(c.done)
	defer close(c.quit)
	var (
		lastRound time.Time
		timer     = time.NewTimer(time.Hour)
		timerOn   bool
	)
	timer.Stop()
	for {
		if !c.anyDirty() {
			select {
			case <-c.wake:
				continue
			case <-c.stop:
				return
			}
		}
		since := time.Since(lastRound)
		if c.opts.Durability == DurabilityAlways || since >= c.opts.FsyncInterval ||
			c.loaded(c.arrived.Load(), since) {
			if timerOn {
				timer.Stop()
				timerOn = false
			}
			lastRound = time.Now()
			c.roundStart.Store(int64(lastRound.Sub(c.base)))
			c.arrived.Store(0)
			c.round()
			continue
		}
		if !timerOn {
			timer.Reset(c.opts.FsyncInterval - since)
			timerOn = true
		}
		select {
		case <-c.wake:
		case <-timer.C:
			timerOn = false
		case <-c.stop:
			return // every writer flushed its own pending data when it drained
		}
	}
}

// round orders every dirty writer to fsync and waits for all of them.
func (c *committer) round() {
	start := time.Now()
	c.dirty = c.dirty[:0]
	for _, p := range c.parts {
		if p.dirty.Swap(false) {
			c.dirty = append(c.dirty, p)
		}
	}
	if len(c.dirty) == 0 {
		return
	}
	c.roundWG.Add(len(c.dirty))
	for _, p := range c.dirty {
		p.syncOrder <- struct{}{}
	}
	c.roundWG.Wait()
	c.rounds.Add(1)
	c.roundTime.Observe(time.Since(start))
}

// synced is a writer's fsync in a round: bounded by syncSem.
func (c *committer) synced(p *partition) {
	if len(p.pending) > 0 {
		// Counted before the acks go out, so that whoever saw an ack sees it.
		c.roundRecords.Add(uint64(len(p.pending)))
		c.roundBytes.Add(uint64(p.pendingBytes))
		c.syncSem <- struct{}{}
		p.commit(true)
		<-c.syncSem
	}
	c.roundWG.Done()
}

func (c *committer) stats(parts []PartitionStats) CommitStats {
	s := CommitStats{
		Rounds:       c.rounds.Load(),
		RoundRecords: c.roundRecords.Load(),
		RoundBytes:   c.roundBytes.Load(),
		RoundLatency: c.roundTime.Snapshot(),
	}
	for i := range parts {
		s.Fsyncs += parts[i].Fsyncs
		s.WrittenBytes += parts[i].WrittenBytes
	}
	return s
}

// run is a partition's writer goroutine: it writes queued appends to the OS
// and fsyncs when the committer orders it to.
func (p *partition) run(c *committer, drained *sync.WaitGroup) {
	reqs := p.reqs
	maxPending := 4 * p.opts.MaxBatch // beyond it the queue fills: backpressure
	for {
		// An order first: a round waits for every writer in it.
		select {
		case <-p.syncOrder:
			c.synced(p)
			continue
		default:
		}
		in := reqs
		if len(p.pending) >= maxPending {
			in = nil
		}
		select {
		case <-p.syncOrder:
			c.synced(p)
		case r, ok := <-in:
			if !ok {
				// Closing: make what is written durable without waiting for
				// a round, then serve orders until the committer ends.
				reqs = nil
				if len(p.pending) > 0 {
					p.commit(p.opts.Durability != DurabilityNone)
				}
				drained.Done()
				continue
			}
			p.writeQueued(c, r)
		case <-c.quit:
			return
		}
	}
}

// writeQueued writes r and whatever else is queued (up to MaxBatch) as one
// batch.
func (p *partition) writeQueued(c *committer, r *appendReq) {
	batch := append(p.collectBuf[:0], r)
drain:
	for len(batch) < p.opts.MaxBatch {
		select {
		case r, ok := <-p.reqs:
			if !ok {
				break drain // the next receive sees the close
			}
			batch = append(batch, r)
		default:
			break drain
		}
	}
	first := len(p.pending) == 0
	before := p.pendingBytes
	p.write(batch)
	clear(batch)
	p.collectBuf = batch[:0]
	switch {
	case len(p.pending) == 0:
	case p.opts.Durability == DurabilityNone:
		p.commit(false)
	default:
		c.wrote(p, p.pendingBytes-before, first)
	}
}
