package groups

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// fetcher serves one partition's fetches for a group: it long-polls the log
// (waits on its durable-data notification) so an idle group does not spin.
type fetcher struct {
	log       *wal.Log
	partition int
	requests  chan queue.Fetch // the core has at most one fetch outstanding per partition
	results   chan<- fetchResult
	want      *demand
	logger    *slog.Logger
}

func newFetcher(l *wal.Log, partition int, results chan<- fetchResult, want *demand, logger *slog.Logger) *fetcher {
	return &fetcher{log: l, partition: partition, requests: make(chan queue.Fetch, 1), results: results, want: want, logger: logger}
}

// demand says whether a group's reads are wanted now: some member has
// credit left, so a record read would go out at once. Only then does a
// fetcher wait as a reader whose wait starts a commit round
// (wal.Log.WaitReadable); a group whose members are all busy or absent
// only fills its read-ahead and waits for records to become durable by
// themselves. The runner sets it, fetchers read it.
type demand struct {
	on atomic.Bool
	mu sync.Mutex
	ch chan struct{} // closed and replaced when on turns true
}

func newDemand() *demand { return &demand{ch: make(chan struct{})} }

// set records whether members have credit; turning on wakes the fetchers.
func (d *demand) set(on bool) {
	if d.on.Swap(on) || !on {
		return
	}
	d.mu.Lock()
	close(d.ch)
	d.ch = make(chan struct{})
	d.mu.Unlock()
}

// wait returns a channel closed when demand next turns on.
func (d *demand) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

func (f *fetcher) run(ctx context.Context) {
	for {
		select {
		case req := <-f.requests:
			if res, ok := f.serve(ctx, req); ok {
				f.results <- res
			}
		case <-ctx.Done():
			return
		}
	}
}

func (f *fetcher) serve(ctx context.Context, req queue.Fetch) (fetchResult, bool) {
	retry := retryBackoff{policy: &readRetry}
	for {
		b, err := readWhenDurable(ctx, f.log, f.partition, req.From, req.MaxMsgs, req.MaxBytes, f.want)
		if ctx.Err() != nil {
			return fetchResult{}, false
		}
		if err == nil {
			return fetchResult{partition: f.partition, msgs: localMsgs(f.partition, b.Entries), next: b.Next}, true
		}
		f.logger.Error("read partition", "partition", f.partition, "from", req.From, "err", err)
		if !retry.wait(ctx) {
			return fetchResult{}, false
		}
	}
}

// refetch reads again records the core set aside (they are durable, so no
// waiting), retrying paced while the read fails, and hands the answer to the
// runner. The core has at most one Refetch per partition outstanding.
func (r *runner) refetch(ctx context.Context, f queue.Fetch, node string, local int) {
	var b retryBackoff
	for {
		res, err := r.readAgain(ctx, f, node, local)
		if err == nil {
			select {
			case r.results <- res:
			case <-ctx.Done():
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.logger.Warn("read set-aside records again", "partition", f.Partition, "from", f.From, "err", err)
		if !b.wait(ctx) {
			return
		}
	}
}

// readAgain reads f from the local log, or from node (the owner of a
// partition of another node, local there).
func (r *runner) readAgain(ctx context.Context, f queue.Fetch, node string, local int) (fetchResult, error) {
	if f.Partition < partitionStride {
		b, err := r.log.Read(f.Partition, f.From, f.MaxMsgs, f.MaxBytes)
		if err != nil {
			return fetchResult{}, err
		}
		return fetchResult{partition: f.Partition, msgs: localMsgs(f.Partition, b.Entries), next: b.Next, refetch: true}, nil
	}
	batch, err := r.reg.cfg.Peers.Fetch(ctx, node, r.key, RemoteFetch{Partition: local, From: f.From, MaxMsgs: f.MaxMsgs, MaxBytes: f.MaxBytes})
	if err != nil {
		return fetchResult{}, err
	}
	msgs := remoteMsgs(f.Partition, f.Partition-local, batch, func(offset uint64) { r.badRemote(node, local, offset) })
	return fetchResult{partition: f.Partition, msgs: msgs, next: batch.Next, durable: batch.Durable, refetch: true}, nil
}

// readWhenDurable reads partition p from offset from on once there is
// something new there: a durable record at from or after, or retention
// having removed from. It waits in the log (no polling) until ctx ends, and
// then returns an empty batch. While want is on (nil: always), it waits as
// a reader whose wait starts a commit round when records nobody waited for
// are written but not yet durable (wal.Log.WaitReadable).
func readWhenDurable(ctx context.Context, l *wal.Log, p int, from uint64, maxMsgs, maxBytes int, want *demand) (wal.Batch, error) {
	for {
		// Take the notification channels before looking, so a move in
		// between is not missed.
		wake := l.Notify(p)
		var wanted <-chan struct{}
		if want != nil {
			wanted = want.wait()
		}
		if l.Durable(p) >= from || l.First(p) > from {
			b, err := l.Read(p, from, maxMsgs, maxBytes)
			if err != nil || b.Next > from {
				return b, err
			}
			// Nothing readable after all (retention meanwhile): wait for the marks to move.
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return wal.Batch{Next: from}, nil
			}
		}
		if want == nil || want.on.Load() {
			if !l.WaitReadable(ctx, p, from) {
				return wal.Batch{Next: from}, nil
			}
			continue
		}
		select {
		case <-wake:
		case <-wanted:
		case <-ctx.Done():
			return wal.Batch{Next: from}, nil
		}
	}
}
