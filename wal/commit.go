package wal

import (
	"sync"
	"sync/atomic"
	"time"

	"edgeq/internal/hist"
)

// committer is the log's one commit schedule: a single goroutine for the
// whole node (not one timer per partition) that takes the queued appends of
// every partition, writes each partition's batch to the OS and then runs an
// fsync round over the partitions it dirtied. A round's fsyncs run on a
// small, fixed pool of sync workers (Options.SyncWorkers): the partitions'
// files are independent, and on ext4 fsyncs that overlap share one journal
// commit, so a round costs about one fsync's latency instead of one per dirty
// partition. Only the committer and its workers touch a partition's tail, and
// never two at once for one partition.
//
// When a round starts:
//   - always: as soon as something is written; rounds run back to back.
//   - interval: when fsync_interval has passed since the last round started,
//     or at once when the written, unsynced bytes reach commit_bytes (load: a
//     windowed publisher is not held to window / interval). A trickle gets at
//     most one round per fsync_interval.
//   - none: never; a batch is complete once written to the OS.
type committer struct {
	parts []*partition
	opts  *Options

	wake chan struct{} // cap 1: something was queued or a queue was closed
	done chan struct{}

	syncq chan *partition // to the sync workers
	wg    sync.WaitGroup
	dirty []*partition

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
	c := &committer{
		parts:     parts,
		opts:      opts,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		roundTime: hist.New(FsyncBounds),
	}
	if n := min(opts.SyncWorkers, len(parts)); n > 1 {
		c.syncq = make(chan *partition)
		for range n {
			go c.syncWorker()
		}
	}
	return c
}

// kick wakes the committer; enqueuers call it after each send.
func (c *committer) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *committer) syncWorker() {
	for p := range c.syncq {
		p.commit(true)
		c.wg.Done()
	}
}

func (c *committer) run() {
	defer close(c.done)
	defer func() {
		if c.syncq != nil {
			close(c.syncq)
		}
	}()
	var (
		lastRound time.Time
		timer     = time.NewTimer(time.Hour)
		timerOn   bool
	)
	timer.Stop()
	for {
		open, bytes := c.collect()
		if bytes == 0 && !c.hasPending() {
			if !open {
				return
			}
			<-c.wake
			continue
		}
		switch c.opts.Durability {
		case DurabilityNone:
			for _, p := range c.parts {
				if len(p.pending) > 0 {
					p.commit(false)
				}
			}
			continue
		case DurabilityAlways:
			c.round()
			continue
		}
		since := time.Since(lastRound)
		if !open || since >= c.opts.FsyncInterval || c.pendingBytes() >= c.opts.CommitBytes {
			if timerOn {
				timer.Stop()
				timerOn = false
			}
			lastRound = time.Now()
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
		}
	}
}

// collect takes up to MaxBatch queued appends of each partition and writes
// them, one batch per partition. It reports whether any queue is still open
// and how many bytes it wrote.
func (c *committer) collect() (open bool, written int) {
	for _, p := range c.parts {
		if p.closed {
			continue
		}
		batch := p.collectBuf[:0]
	drain:
		for len(batch) < c.opts.MaxBatch {
			select {
			case r, ok := <-p.reqs:
				if !ok {
					p.closed = true
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if !p.closed {
			open = true
		}
		if len(batch) > 0 {
			before := p.pendingBytes
			p.write(batch)
			written += p.pendingBytes - before
			clear(batch)
		}
		p.collectBuf = batch[:0]
	}
	return open, written
}

func (c *committer) hasPending() bool {
	for _, p := range c.parts {
		if len(p.pending) > 0 {
			return true
		}
	}
	return false
}

func (c *committer) pendingBytes() int {
	n := 0
	for _, p := range c.parts {
		n += p.pendingBytes
	}
	return n
}

// round fsyncs every partition with pending appends and completes them.
func (c *committer) round() {
	start := time.Now()
	c.dirty = c.dirty[:0]
	var records, bytes int
	for _, p := range c.parts {
		if len(p.pending) > 0 {
			c.dirty = append(c.dirty, p)
			records += len(p.pending)
			bytes += p.pendingBytes
		}
	}
	if len(c.dirty) == 0 {
		return
	}
	if c.syncq == nil || len(c.dirty) == 1 {
		for _, p := range c.dirty {
			p.commit(true)
		}
	} else {
		c.wg.Add(len(c.dirty))
		for _, p := range c.dirty {
			c.syncq <- p
		}
		c.wg.Wait()
	}
	c.rounds.Add(1)
	c.roundRecords.Add(uint64(records))
	c.roundBytes.Add(uint64(bytes))
	c.roundTime.Observe(time.Since(start))
}
