package jsapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/wal"
)

// Ordered consumers: a consumer with ack_policy none (nats.go's
// OrderedConsumer and KV Watch, `nats sub --stream`, `nats bench js
// ordered`) is a read of the log with cursors of its own. It never touches
// a queue group: no group is created, no offset committed, nothing held
// back from retention. It is ephemeral (in memory only), lives while its
// connection does and, like any ephemeral consumer, ends after its
// inactive_threshold without use. It reads on demand, what a pull request
// or the push window asks for, merging the partitions in stream-sequence
// order, and keeps nothing read between reads: the memory bound is
// orderedReaders reads at once, each holding one chunk per partition, plus
// the messages of one answer (orderedReadBytes); the number of consumers is
// bounded too (jetstream.max_ordered per node, max_ordered_per_conn per
// connection).

// orderedReadBytes bounds one read of an ordered consumer; orderedScanBytes
// the records one Next looks at for a filter that matches few of them.
const (
	orderedReadBytes = 1 << 20
	orderedScanBytes = 8 << 20
	// One chunk read of a partition while merging (dropped after the call).
	orderedChunk      = 128
	orderedChunkBytes = 16 << 10
	// orderedReaders: ordered consumers reading at once on the node. With
	// the chunks, the memory they hold is at most orderedReaders x
	// partitions x orderedChunkBytes (4 x 10 x 16 KiB by default) plus
	// what a pull asks for.
	orderedReaders = 4
)

// Ordered is an ordered (ack none) consumer.
type Ordered struct {
	Name    string
	Config  jetstream.ConsumerConfig
	Created time.Time
	Owner   uint64 // the connection that created it
	view    streamView
	all     bool
	device  string
	// home and hot: the partitions one device's records can be in (its
	// home partition, its hot one), the only ones a device's reads scan.
	home, hot int
	svc       *Service

	// Wake is signalled when the log may have grown.
	Wake chan struct{}

	mu      sync.Mutex
	next    []uint64                   // per partition: next offset to read
	pending []LastPos                  // last_per_subject / last: positions to deliver first
	hist    [resumeBatches]resumeBatch // the last reads (resumeFrom)
	histN   int
	cseq    uint64 // deliveries so far (the consumer sequence)
	sseq    uint64 // stream sequence of the last delivery
	active  time.Time
	gone    bool
}

// orderedSet holds the node's ordered consumers.
type orderedSet struct {
	mu sync.Mutex
	m  map[string]*Ordered // bound: Config.MaxOrdered
	// recent are ordered consumers that ended, for resumeFrom; bound:
	// resumeRecent.
	recent []*Ordered

	readers chan struct{} // bound: orderedReaders
	some    chan struct{} // closed when the first consumer comes (then replaced)

	Created, Expired, Refused atomic.Uint64
	Delivered                 atomic.Uint64
	Reading                   atomic.Int64 // bytes the readers hold now
}

func (o *orderedSet) count(stream string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.m {
		if c.view.name == stream {
			n++
		}
	}
	return n
}

// OrderedStats are the ordered consumers' figures.
type OrderedStats struct {
	Active, Max                          int
	Created, Expired, Refused, Delivered uint64
	LastIndexDevices                     int
	LastIndexDropped                     uint64
	ReadBytes                            int64 // what the readers hold now
}

// OrderedStats returns the figures of ordered consumers and the last-value
// index.
func (s *Service) OrderedStats() OrderedStats {
	s.ordered.mu.Lock()
	n := len(s.ordered.m)
	s.ordered.mu.Unlock()
	return OrderedStats{Active: n, Max: s.cfg.MaxOrdered, Created: s.ordered.Created.Load(), Expired: s.ordered.Expired.Load(),
		Refused: s.ordered.Refused.Load(), Delivered: s.ordered.Delivered.Load(), LastIndexDevices: s.last.Len(), LastIndexDropped: s.last.Dropped.Load(),
		ReadBytes: s.ordered.Reading.Load()}
}

// createOrdered makes an ordered consumer of cc (name set) on stream v for
// connection owner.
func (s *Service) createOrdered(v streamView, cc jetstream.ConsumerConfig, ephemeral bool, owner uint64) ([]byte, *APIError) {
	if !ephemeral {
		return nil, Err(400, CodeConsumerCreate, "edgeq: ack_policy none is an ephemeral read of the log (no durable name); a durable consumer needs ack_policy explicit")
	}
	if len(cc.FilterSubjects) > 1 {
		return nil, Err(400, CodeConsumerCreate, "edgeq: filter_subjects with more than one subject is not supported; use filter_subject")
	}
	if len(cc.FilterSubjects) == 1 {
		cc.FilterSubject, cc.FilterSubjects = cc.FilterSubjects[0], nil
	}
	all, device, ok := v.match(cc.FilterSubject)
	if !ok {
		return nil, Err(400, CodeConsumerCreate, "filter_subject %q is not within the stream's subjects %s.> (a device's subject, or all)", cc.FilterSubject, v.prefix)
	}
	if cc.DeliverSubject != "" && !validDeliverSubject(cc.DeliverSubject, s.cfg.Prefix) {
		return nil, Err(400, CodeConsumerCreate, "deliver_subject %q invalid (no wildcards, not within the stream)", cc.DeliverSubject)
	}
	if cc.InactiveThreshold < 0 {
		return nil, Err(400, CodeConsumerCreate, "inactive_threshold %v must not be negative", cc.InactiveThreshold)
	}
	if cc.InactiveThreshold == 0 {
		cc.InactiveThreshold = DefaultInactiveThreshold
	}
	cc.AckPolicy, cc.MaxDeliver, cc.Replicas, cc.AckWait = jetstream.AckNonePolicy, 1, 1, 0
	if cc.MaxRequestBatch <= 0 || cc.MaxRequestBatch > MaxRequestBatch {
		cc.MaxRequestBatch = MaxRequestBatch
	}
	o := &Ordered{Name: cc.Name, Config: cc, Created: s.now().UTC(), Owner: owner, view: v, all: all, device: device, svc: s,
		Wake: make(chan struct{}, 1), active: s.now(), home: -1, hot: -1}
	if !all {
		o.home, o.hot = s.log.HomePartition(device), s.log.HotPartition(device)
	}
	if e := s.startOrdered(o); e != nil {
		return nil, e
	}
	s.mu.Lock()
	_, taken := s.consumers[o.Name]
	s.mu.Unlock()
	s.ordered.mu.Lock()
	if old := s.ordered.m[o.Name]; old != nil || taken {
		s.ordered.mu.Unlock()
		return nil, Err(400, CodeConsumerExists, "consumer already exists")
	}
	mine := 0
	for _, c := range s.ordered.m {
		if c.Owner == owner {
			mine++
		}
	}
	if len(s.ordered.m) >= s.cfg.MaxOrdered || owner != 0 && mine >= s.cfg.MaxOrderedPerConn {
		s.ordered.Refused.Add(1)
		s.ordered.mu.Unlock()
		return nil, Err(400, CodeMaxConsumers, "edgeq: maximum ordered consumers reached (%d per node, %d per connection: jetstream.max_ordered, max_ordered_per_conn)",
			s.cfg.MaxOrdered, s.cfg.MaxOrderedPerConn)
	}
	s.ordered.m[o.Name] = o
	if len(s.ordered.m) == 1 {
		close(s.ordered.some)
		s.ordered.some = make(chan struct{})
	}
	s.ordered.Created.Add(1)
	s.ordered.mu.Unlock()
	if s.hooks.OrderedCreated != nil {
		s.hooks.OrderedCreated(o)
	}
	return marshal("consumer_create_response", o.info()), nil
}

// validDeliverSubject: a literal subject outside the stream.
func validDeliverSubject(subj, prefix string) bool {
	return !strings.ContainsAny(subj, "*> \t") && !strings.HasPrefix(subj, prefix+".")
}

// startOrdered sets o's cursors from its deliver policy.
func (s *Service) startOrdered(o *Ordered) *APIError {
	cc := &o.Config
	np := s.log.NumPartitions()
	o.next = make([]uint64, np)
	from := func(f func(int) uint64) {
		for p := range np {
			o.next[p] = max(f(p)+1, s.log.First(p), 1)
		}
	}
	durableEnd := func(p int) uint64 { return s.log.Durable(p) }
	switch cc.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		if cc.OptStartSeq != 0 || cc.OptStartTime != nil {
			return Err(400, CodeInvalidPolicy, "opt_start_seq and opt_start_time need deliver_policy by_start_sequence or by_start_time")
		}
		from(func(int) uint64 { return 0 })
	case jetstream.DeliverNewPolicy:
		from(durableEnd)
	case jetstream.DeliverByStartSequencePolicy:
		if cc.OptStartSeq == 0 {
			return Err(400, CodeInvalidPolicy, "consumer deliver policy by_start_sequence needs opt_start_seq (> 0)")
		}
		if next, ok := s.resumeFrom(o, cc.OptStartSeq-1); ok {
			copy(o.next, next)
		} else {
			from(s.startBySeq(cc.OptStartSeq))
		}
	case jetstream.DeliverByStartTimePolicy:
		if cc.OptStartTime == nil {
			return Err(400, CodeInvalidPolicy, "consumer deliver policy by_start_time needs opt_start_time (RFC 3339)")
		}
		from(StartByTime(s.log, *cc.OptStartTime))
	case jetstream.DeliverLastPolicy, jetstream.DeliverLastPerSubjectPolicy:
		// The newest record of each matching device (last: of the newest
		// one only), then what comes after. The index's snapshot and the
		// cursors are taken together, so nothing falls between them.
		pos, next, ok := s.lastSnapshot(o)
		if !ok {
			return Err(503, CodeConsumerCreate, "edgeq: the last-value index is still reading the log; try again in a moment")
		}
		if cc.DeliverPolicy == jetstream.DeliverLastPolicy && len(pos) > 1 {
			pos = pos[len(pos)-1:]
		}
		o.pending = pos
		copy(o.next, next)
	default:
		return Err(400, CodeInvalidPolicy, "edgeq: deliver_policy %v is not supported", cc.DeliverPolicy)
	}
	return nil
}

// lastSnapshot waits (bounded) for the last-value index to be ready and
// takes its snapshot for o's filter.
func (s *Service) lastSnapshot(o *Ordered) ([]LastPos, []uint64, bool) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pos, next, ok := s.last.Snapshot(o.matches, s.seqOf)
		if ok || time.Now().After(deadline) {
			return pos, next, ok
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (o *Ordered) matches(device string) bool { return o.all || device == o.device }

// info is o's consumer info.
func (o *Ordered) info() jetstream.ConsumerInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	ci := jetstream.ConsumerInfo{Stream: o.view.name, Name: o.Name, Created: o.Created, Config: o.Config, TimeStamp: time.Now().UTC()}
	ci.Delivered.Consumer, ci.Delivered.Stream = o.cseq, o.sseq
	ci.AckFloor = ci.Delivered
	ci.NumPending = o.pendingLocked()
	return ci
}

// pendingLocked is what is left to deliver: for a consumer over every
// device, the last values still to send plus the records ahead of its
// cursors (exact but for move markers); for one device, the last value
// still to send only (counting the device's records ahead would mean
// reading them). nats.go's KV watcher ends its initial values when it has
// received this many at the start, or when a message says 0: an
// overcount would hold back its end-of-initial-values marker. Called with mu.
func (o *Ordered) pendingLocked() uint64 {
	n := uint64(len(o.pending))
	if !o.all {
		return n
	}
	for p, next := range o.next {
		if d := o.svc.log.Durable(p); d+1 > next {
			n += d + 1 - next
		}
	}
	return n
}

// Msg is one message of an ordered consumer.
type Msg struct {
	Found
	ConsumerSeq uint64
	Pending     uint64 // left after it
}

// Next reads up to max messages (about maxBytes) in consumer order. The
// caller sends them in that order; they are taken as delivered.
func (o *Ordered) Next(maxMsgs, maxBytes int) ([]Msg, error) {
	o.svc.ordered.readers <- struct{}{}
	defer func() { <-o.svc.ordered.readers }()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone {
		return nil, nil
	}
	if maxBytes <= 0 {
		maxBytes = orderedReadBytes
	}
	maxBytes = min(maxBytes, orderedReadBytes)
	var out []Msg
	size := 0
	take := func(p int, e wal.Entry) {
		o.cseq++
		seq := o.svc.seqOf(p, e.Offset)
		o.sseq = seq
		out = append(out, Msg{Found: Found{Stream: o.view.name, Subject: o.view.subject(e.Record.Device), Seq: seq, Partition: p, Entry: e},
			ConsumerSeq: o.cseq})
		size += len(e.Record.Payload)
	}
	log := o.svc.log
	for len(o.pending) > 0 && len(out) < maxMsgs && size < maxBytes {
		pos := o.pending[0]
		o.pending = o.pending[1:]
		b, err := log.Read(pos.Partition, pos.Offset, 1, 1)
		if err != nil {
			return out, err
		}
		if len(b.Entries) == 1 && b.Entries[0].Offset == pos.Offset && b.Entries[0].Record.Kind == wal.KindData {
			take(pos.Partition, b.Entries[0])
		}
	}
	// Merge the partitions in stream-sequence order: each round takes the
	// partition whose next record has the lowest sequence. Chunks are read
	// per call and dropped with it: nothing is held between reads.
	type head struct {
		es   []wal.Entry
		next uint64 // where the partition's next read starts
		done bool   // nothing more durable
		// bytes of es's chunk
		bytes int64
	}
	heads := make([]head, len(o.next))
	scanned := 0
	// held: bytes of the chunks in hand (the ordered readers' memory,
	// edgeq_jetstream_ordered_read_bytes).
	var held int64
	defer func() { o.svc.ordered.Reading.Add(-held) }()
	phase := len(out) // the messages before are from the last-value list
	rec := resumeBatch{start: slices.Clone(o.next)}
	defer func() {
		for _, m := range out[min(phase, len(out)):] {
			rec.msgs = append(rec.msgs, resumeMsg{seq: m.Seq, p: int32(m.Partition), off: m.Entry.Offset})
		}
		if len(rec.msgs) > 0 {
			o.hist[o.histN%len(o.hist)] = rec
			o.histN++
		}
	}()
	fill := func(p int) error {
		h := &heads[p]
		if !o.all && p != o.home && p != o.hot {
			h.done = true // the device is never stored there
		}
		for len(h.es) == 0 && !h.done {
			from := max(h.next, o.next[p])
			if from > log.Durable(p) {
				h.done = true
				return nil
			}
			b, err := log.Read(p, from, orderedChunk, orderedChunkBytes)
			if err != nil {
				h.done = true
				return err
			}
			if b.Next <= from {
				h.done = true
				return nil
			}
			h.es, h.next = b.Entries, b.Next
			var n int64
			for _, e := range b.Entries {
				n += int64(len(e.Raw))
			}
			o.svc.ordered.Reading.Add(n - h.bytes)
			held += n - h.bytes
			h.bytes = n
			if len(h.es) == 0 {
				o.next[p] = b.Next // lost or corrupt records only
			}
		}
		return nil
	}
	for len(out) < maxMsgs && size < maxBytes && scanned < orderedScanBytes {
		best := -1
		for p := range heads {
			if err := fill(p); err != nil {
				return out, err
			}
			if len(heads[p].es) == 0 {
				continue
			}
			if best < 0 || o.svc.seqOf(p, heads[p].es[0].Offset) < o.svc.seqOf(best, heads[best].es[0].Offset) {
				best = p
			}
		}
		if best < 0 {
			break
		}
		h := &heads[best]
		e := h.es[0]
		h.es = h.es[1:]
		scanned += len(e.Raw)
		o.next[best] = e.Offset + 1
		if len(h.es) == 0 {
			o.next[best] = max(o.next[best], h.next)
		}
		if e.Record.Kind == wal.KindData && o.matches(e.Record.Device) {
			take(best, e)
		}
	}
	left := o.pendingLocked()
	for i := len(out) - 1; i >= 0; i-- {
		out[i].Pending = left
		left++
	}
	o.svc.ordered.Delivered.Add(uint64(len(out)))
	return out, nil
}

// More reports whether something may be there to read.
func (o *Ordered) More() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		return true
	}
	for p, next := range o.next {
		if next <= o.svc.log.Durable(p) {
			return true
		}
	}
	return false
}

// Last is the consumer and stream sequence of the last delivery (an idle
// heartbeat's Nats-Last-Consumer and Nats-Last-Stream).
func (o *Ordered) Last() (cseq, sseq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cseq, o.sseq
}

// Touch records that o is in use.
func (o *Ordered) Touch(now time.Time) {
	o.mu.Lock()
	if now.After(o.active) {
		o.active = now
	}
	o.mu.Unlock()
}

// Gone reports whether o was deleted or expired.
func (o *Ordered) Gone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gone
}

// Ordered returns ordered consumer name of stream, nil if there is none.
func (s *Service) Ordered(stream, name string) *Ordered {
	s.ordered.mu.Lock()
	defer s.ordered.mu.Unlock()
	if o := s.ordered.m[name]; o != nil && o.view.name == stream {
		return o
	}
	return nil
}

// OrderedByName returns the ordered consumer named name in any stream.
func (s *Service) OrderedByName(name string) *Ordered {
	s.ordered.mu.Lock()
	defer s.ordered.mu.Unlock()
	return s.ordered.m[name]
}

// removeOrdered ends o; false if it was gone already.
func (s *Service) removeOrdered(o *Ordered) bool {
	s.ordered.mu.Lock()
	if s.ordered.m[o.Name] != o {
		s.ordered.mu.Unlock()
		return false
	}
	delete(s.ordered.m, o.Name)
	if len(s.ordered.recent) >= resumeRecent {
		s.ordered.recent = slices.Delete(s.ordered.recent, 0, 1)
	}
	s.ordered.recent = append(s.ordered.recent, o)
	s.ordered.mu.Unlock()
	o.mu.Lock()
	o.gone = true
	o.mu.Unlock()
	o.signal()
	return true
}

func (o *Ordered) signal() {
	select {
	case o.Wake <- struct{}{}:
	default:
	}
}

// DropOrdered ends the ordered consumers of connection owner (closed).
func (s *Service) DropOrdered(owner uint64) {
	s.ordered.mu.Lock()
	var gone []*Ordered
	for _, o := range s.ordered.m {
		if o.Owner == owner {
			gone = append(gone, o)
		}
	}
	s.ordered.mu.Unlock()
	for _, o := range gone {
		s.removeOrdered(o)
	}
}

// expireOrdered ends ordered consumers unused for their inactive_threshold.
func (s *Service) expireOrdered(now time.Time) {
	s.ordered.mu.Lock()
	var gone []*Ordered
	for _, o := range s.ordered.m {
		o.mu.Lock()
		idle := now.Sub(o.active) >= o.Config.InactiveThreshold
		o.mu.Unlock()
		if idle {
			gone = append(gone, o)
		}
	}
	s.ordered.mu.Unlock()
	for _, o := range gone {
		if s.removeOrdered(o) {
			s.ordered.Expired.Add(1)
		}
	}
}

// wakeOrdered follows partition p's durable mark and wakes the ordered
// consumers when it moves: one waiter per partition, whatever their number.
func (s *Service) wakeOrdered(ctx context.Context, p int) {
	for {
		// With no ordered consumer, no wake-up per append.
		s.ordered.mu.Lock()
		idle := len(s.ordered.m) == 0
		some := s.ordered.some
		s.ordered.mu.Unlock()
		if idle {
			select {
			case <-ctx.Done():
				return
			case <-some:
			}
			continue
		}
		ch := s.log.Notify(p)
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		s.ordered.mu.Lock()
		for _, o := range s.ordered.m {
			o.signal()
		}
		s.ordered.mu.Unlock()
	}
}

// Resuming exactly. A client resets an ordered consumer (a gap, missed
// heartbeats, a reconnect, a deleted consumer) by creating a new one at
// by_start_sequence = the last stream sequence it received + 1. Stream
// sequences are offset-major, so that start is exact within one partition
// only: in the others it could repeat or skip readings. So each ordered
// consumer remembers its last reads (where each partition's cursor stood,
// and what it delivered), and one that ended is remembered a while: a new
// consumer whose start is right after a message one of them delivered, with
// the same filter, resumes from exactly where that delivery left the
// cursors. Otherwise the start is StartBySeq's.

const (
	resumeBatches = 4  // reads remembered per consumer
	resumeRecent  = 64 // ended consumers remembered
)

type resumeMsg struct {
	seq uint64
	p   int32
	off uint64
}

// resumeBatch is one read: the cursors before it and what it delivered.
type resumeBatch struct {
	start []uint64
	msgs  []resumeMsg
}

// resumeFrom finds the cursors right after the delivery of stream sequence
// last by a consumer with o's view and filter.
func (s *Service) resumeFrom(o *Ordered, last uint64) ([]uint64, bool) {
	s.ordered.mu.Lock()
	cands := slices.Clone(s.ordered.recent)
	for _, c := range s.ordered.m {
		cands = append(cands, c)
	}
	s.ordered.mu.Unlock()
	for i := len(cands) - 1; i >= 0; i-- {
		c := cands[i]
		if c.view != o.view || c.all != o.all || c.device != o.device {
			continue
		}
		if next, ok := c.resumeAfter(last, len(o.next)); ok {
			return next, true
		}
	}
	return nil, false
}

// resumeAfter is c's cursors right after it delivered sequence last.
func (c *Ordered) resumeAfter(last uint64, partitions int) ([]uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.hist {
		if len(b.start) != partitions {
			continue
		}
		for i, m := range b.msgs {
			if m.seq != last {
				continue
			}
			next := slices.Clone(b.start)
			for _, d := range b.msgs[:i+1] {
				next[d.p] = max(next[d.p], d.off+1)
			}
			return next, true
		}
	}
	return nil, false
}
