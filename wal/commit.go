package wal

import (
	"log/slog"
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
//   - interval: on demand, as the pacer decides (pacer.go): at once or after
//     at most fsync_interval when something waits for durability (a
//     waiting append, Sync, or a reader waiting in WaitReadable on a
//     partition with unsynced records), after
//     lazy_sync when only data nobody waits for is unsynced, back to back
//     under load.
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
	base       time.Time    // monotonic origin of roundStart and dirtySince
	roundStart atomic.Int64 // ns since base when the last round started
	arrived    atomic.Int64 // bytes written since the last round started, all partitions
	waiting    atomic.Int64 // unsynced appends someone waits for, all partitions
	pacer      *pacer       // the committer goroutine's alone

	// The commit journal (journal.go): nil under durability none. While it
	// works a round is one journal fsync; after a journal error (broken) the
	// rounds fsync each partition file as before.
	j        *journal
	broken   atomic.Bool
	cur      *roundResult // the running round; set before its orders go out
	ckpt     bool         // the orders out are a checkpoint's: fsync the file
	ckptFail atomic.Bool
	logger   *slog.Logger

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
	Fsyncs       uint64 // fsync calls, all partitions and the offsets journal
	WrittenBytes uint64 // bytes written to the OS, all partitions and the offsets journal
	// JournalFsyncs are the commit journal's fsyncs (one per round while it
	// works), Checkpoints the times it was emptied.
	JournalFsyncs, Checkpoints uint64
	RoundLatency               hist.Snapshot
}

// roundResult is a journaled round's outcome, for the writers that gave
// their records to it: done closes once the journal fsync returned.
type roundResult struct {
	done chan struct{}
	err  error
}

func newCommitter(parts []*partition, opts *Options, j *journal, logger *slog.Logger) *committer {
	return &committer{
		j:         j,
		logger:    logger,
		parts:     parts,
		opts:      opts,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		syncSem:   make(chan struct{}, opts.SyncWorkers),
		base:      time.Now(),
		pacer:     newPacer(opts.FsyncInterval, opts.LazySync, opts.CommitBytes),
		roundTime: hist.New(FsyncBounds),
	}
}

func (c *committer) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) now() time.Duration { return time.Since(c.base) }

// wrote is called by a writer after it added n unsynced bytes, waiters of
// them with someone waiting for their durability; first says that it had
// nothing unsynced before. The committer is woken only when its decision may
// change: a partition became dirty, the first waiter arrived, or the load
// rule holds (a trickle costs no wake-up per record).
func (c *committer) wrote(p *partition, n, waiters int, first bool) {
	arrived := c.arrived.Add(int64(n))
	firstWaiter := waiters > 0 && c.waiting.Add(int64(waiters)) == int64(waiters)
	if first {
		p.dirtySince.Store(int64(c.now()))
		p.dirty.Store(true)
	}
	if first || firstWaiter || loaded(arrived, c.now()-time.Duration(c.roundStart.Load()), c.opts.FsyncInterval, int64(c.opts.CommitBytes)) {
		c.kick()
	}
}

// state is what is unsynced now, for the pacer.
func (c *committer) state() unsynced {
	u := unsynced{waiting: c.waiting.Load() > 0, arrived: c.arrived.Load()}
	for _, p := range c.parts {
		if p.dirty.Load() {
			if p.readers.Load() > 0 {
				// A consumer waits for what this partition has not yet made
				// durable: that is demand, as a pub-ack is.
				u.waiting = true
			}
			since := time.Duration(p.dirtySince.Load())
			if !u.dirty || since < u.oldest {
				u.oldest = since
			}
			u.dirty = true
		}
	}
	return u
}

func (c *committer) run() {
	defer close(c.done)
	defer close(c.quit)
	var (
		timer   = time.NewTimer(time.Hour)
		timerOn bool
	)
	timer.Stop()
	for {
		u := c.state()
		now := c.now()
		due, wait := u.dirty, time.Duration(0)
		if c.opts.Durability != DurabilityAlways {
			due, wait = c.pacer.next(now, u)
		}
		if due {
			if timerOn {
				timer.Stop()
				timerOn = false
			}
			c.pacer.started(now)
			c.roundStart.Store(int64(now))
			c.arrived.Store(0)
			c.round()
			continue
		}
		if timerOn {
			timer.Stop()
			timerOn = false
		}
		if wait > 0 {
			timer.Reset(wait)
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

// round orders every dirty writer to make its unsynced records durable and
// waits for all of them: with the journal, each gives its records to the
// journal's batch, which is written and fsynced once; without it, each
// fsyncs its own file.
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
	c.rounds.Add(1) // before the acks go out, so that whoever saw an ack sees it
	res := &roundResult{done: make(chan struct{})}
	c.cur = res
	c.roundWG.Add(len(c.dirty))
	for _, p := range c.dirty {
		p.syncOrder <- struct{}{}
	}
	c.roundWG.Wait()
	if c.journaled() {
		if res.err = c.j.commit(); res.err != nil {
			c.broken.Store(true)
			c.logger.Error("commit journal failed: rounds fsync each partition from now on", "err", res.err)
		}
	}
	close(res.done)
	c.roundTime.Observe(time.Since(start))
	if c.journaled() && c.j.full() {
		c.checkpoint()
	}
}

func (c *committer) journaled() bool { return c.j != nil && !c.broken.Load() }

// checkpoint fsyncs every partition file written since the last checkpoint,
// then empties the journal: what it held is in the files now.
func (c *committer) checkpoint() {
	c.ckpt = true
	c.roundWG.Add(len(c.parts))
	for _, p := range c.parts {
		p.syncOrder <- struct{}{}
	}
	c.roundWG.Wait()
	c.ckpt = false
	if c.ckptFail.Swap(false) {
		c.broken.Store(true) // the journal keeps what the files may have lost; open replays it
		c.logger.Error("checkpoint: a partition fsync failed; rounds fsync each partition from now on")
		return
	}
	if err := c.j.reset(); err != nil {
		c.broken.Store(true)
		c.logger.Error("checkpoint: emptying the commit journal failed; rounds fsync each partition from now on", "err", err)
	}
}

// synced is a writer's part of a round (or checkpoint).
func (c *committer) synced(p *partition) {
	if c.ckpt {
		if p.unckpt.Swap(false) {
			c.syncSem <- struct{}{}
			if err := p.syncFile(); err != nil {
				c.ckptFail.Store(true)
			}
			<-c.syncSem
		}
		c.roundWG.Done()
		return
	}
	if p.unsyncedN == 0 {
		c.roundWG.Done()
		return
	}
	// Counted before the acks go out, so that whoever saw an ack sees it.
	c.roundRecords.Add(uint64(p.unsyncedN))
	c.roundBytes.Add(uint64(p.unsyncedBytes))
	if !c.journaled() {
		c.syncSem <- struct{}{}
		p.commit(c, true)
		<-c.syncSem
		c.roundWG.Done()
		return
	}
	res := c.cur
	last := p.last.Load()
	c.j.add(p.id, last-uint64(p.unsyncedN)+1, p.frame, p.unsyncedN)
	c.roundWG.Done()
	<-res.done
	if res.err != nil {
		p.flush(p.pending) // the partition's own fsync, as without a journal
	} else {
		p.synced.Store(last)
		p.publishDurable(last)
		completeAll(p.pending, nil)
	}
	p.finish(c)
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
	if c.j != nil {
		s.Fsyncs += c.j.fsyncs.Load()
		s.WrittenBytes += c.j.written.Load()
		s.JournalFsyncs = c.j.fsyncs.Load()
		s.Checkpoints = c.j.checkpoints.Load()
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
		if p.unsyncedN >= maxPending {
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
				if p.unsyncedN > 0 {
					p.commit(c, p.opts.Durability != DurabilityNone)
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
	// Sync's barriers carry no record: each waits for the round that makes
	// what was written before it durable (at once when nothing is unsynced).
	recs := batch[:0]
	p.barriers = p.barriers[:0]
	for _, r := range batch {
		if r.barrier {
			p.barriers = append(p.barriers, r)
		} else {
			recs = append(recs, r)
		}
	}
	first := p.unsyncedN == 0
	before, waiters := p.unsyncedBytes, len(p.pending)
	if len(recs) > 0 {
		p.write(recs)
	}
	if p.unsyncedN == 0 {
		completeAll(p.barriers, nil)
	} else {
		p.pending = append(p.pending, p.barriers...)
	}
	clear(p.barriers)
	clear(batch)
	p.collectBuf = batch[:0]
	switch {
	case p.unsyncedN == 0:
	case p.opts.Durability == DurabilityNone:
		p.commit(c, false)
	default:
		p.unckpt.Store(true)
		waiters = len(p.pending) - waiters
		p.counted += waiters
		c.wrote(p, p.unsyncedBytes-before, waiters, first)
	}
	// After wrote: whoever got a record back knows that the next round
	// started from now on takes it.
	p.completeLazy()
}
