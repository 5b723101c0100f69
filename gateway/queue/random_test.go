package queue

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	randomSeed  = flag.Uint64("seed", 0, "run the randomized tests with this one seed (0: many seeds)")
	randomSeeds = flag.Int("seeds", 150, "number of seeds per randomized configuration")
	randomSteps = flag.Int("steps", 1500, "steps per randomized run")
)

// TestRandomInterleavings drives the group with random publishes over many
// devices on two nodes (normal and hot partitions, move markers between
// them), member joins and leaves, credit changes, acks, naks, terms,
// in_progress, stale acks, timeouts, retention drops, drains and restarts
// from committed offsets. A model of the runner checks every action as it
// comes out and the bounds after every step. Each run is reproducible from
// its seed (printed on failure; rerun with -seed=N).
func TestRandomInterleavings(t *testing.T) {
	configs := []struct {
		name     string
		ordering Ordering
		strategy Strategy
		filter   bool
		window   int  // Config.DeviceWindow; 0: the default
		seedDiv  int  // run 1/seedDiv of the seeds (at least 3): keeps the test's runtime
		budget   bool // a read-ahead budget (SetBudget), changed during the run (random_budget_test.go)
	}{
		{"per_device_random", OrderPerDevice, StrategyRandom, false, 0, 0, false},
		{"per_device_sticky", OrderPerDevice, StrategySticky, true, 0, 0, false},
		{"none_random", OrderNone, StrategyRandom, true, 0, 0, false},
		{"none_sticky", OrderNone, StrategySticky, false, 0, 0, false},
		{"per_device_window_random", OrderPerDevice, StrategyRandom, false, 3, 10, false},
		{"per_device_window_sticky", OrderPerDevice, StrategySticky, true, 3, 20, false},
		{"per_device_budget_random", OrderPerDevice, StrategyRandom, false, 0, 4, true},
		{"per_device_budget_sticky", OrderPerDevice, StrategySticky, true, 0, 8, true},
		{"none_budget_random", OrderNone, StrategyRandom, true, 0, 8, true},
		{"per_device_window_budget", OrderPerDevice, StrategyRandom, false, 3, 20, true},
	}
	seeds := make([]uint64, 0, *randomSeeds)
	if *randomSeed != 0 {
		seeds = append(seeds, *randomSeed)
	} else {
		n := *randomSeeds
		if testing.Short() {
			n = 10
		}
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			total := map[string]int{}
			for _, seed := range windowSeeds(seeds, c.seedDiv) {
				m := newModel(t, seed, c.ordering, c.strategy, c.filter)
				if c.window > 1 {
					m.setDeviceWindow(c.window)
				}
				if c.budget {
					m.setBudget()
				}
				m.run(*randomSteps)
				if t.Failed() {
					return
				}
				for k, v := range m.counts {
					total[k] += v
				}
			}
			t.Logf("%d seeds: %v", len(windowSeeds(seeds, c.seedDiv)), total)
		})
	}
}

var (
	modelNormal = []int{0, 1, 2, 100, 101, 102} // two nodes, three normal partitions each
	modelHot    = []int{8, 108}                 // one hot partition per node
)

// maxModelRecord is the largest Data the model publishes.
const maxModelRecord = 40

type model struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	cfg   Config
	store *memStore
	parts []int
	g     *Group
	now   time.Time
	inst  int // restarts so far

	committed map[int]uint64
	finished  map[Ref]bool // data records finished in any instance (acked, dead-lettered, filtered)
	dropped   map[Ref]bool // data records retention removed before they finished
	members   map[MemberID]int
	epoch     int // changes whenever the set of members with credit > 0 changes (sticky check)

	// this instance
	pending     map[int]Fetch
	refetch     map[int]Fetch // outstanding Refetch per partition
	fetched     map[Ref]bool
	tries       map[Ref]int
	open        map[Ref]bool // delivered and not finished
	flight      []flight     // in flight, in delivery order
	termed      map[Ref]bool
	firstSeq    map[devKey]uint64 // last seq first-delivered per (node, device)
	sticky      map[string]stickyRec
	draining    bool
	withdrawing bool // the drain is a Withdraw: nothing may be delivered
	drained     bool
	marks       map[int]uint64 // highest offset delivered per partition: a drain delivers nothing above it
	instCommits map[int]uint64
	paused      map[int]bool // partitions paused in this instance

	win *windowModel // the device window checks (random_window_test.go); nil without a window
	bud *budgetModel // the read-ahead budget (random_budget_test.go); nil without one

	log    []string       // recent steps, printed on failure
	counts map[string]int // what the run exercised, for -v
}

type flight struct {
	member   MemberID
	ref      Ref
	try      int
	device   string
	deadline time.Time
}

type stickyRec struct {
	member MemberID
	epoch  int
}

func newModel(t *testing.T, seed uint64, o Ordering, s Strategy, filter bool) *model {
	cfg := DefaultConfig()
	cfg.Ordering, cfg.Strategy = o, s
	rng := rand.New(rand.NewPCG(seed, 0xed9e))
	cfg.AckWait = 30 * time.Second
	cfg.MaxDeliver = 2 + rng.IntN(4)
	cfg.MaxNakDelay = 20 * time.Second
	cfg.ReadAheadMsgs = 2 + rng.IntN(15)
	cfg.ReadAheadBytes = 30 + rng.IntN(200)
	cfg.Deliver = DeliverAll
	if seed%2 == 0 {
		cfg.Deliver = DeliverNew
	}
	if filter {
		cfg.Filter = func(m *Msg) bool { return !strings.HasPrefix(m.Device, "f") }
	}
	// The per-device share of the window: often small, so records are set
	// aside and read again; a small aside table, so reading also blocks.
	if rng.IntN(4) > 0 {
		cfg.DeviceShareMsgs = 1 + rng.IntN(cfg.ReadAheadMsgs)
		cfg.DeviceShareBytes = 1 + rng.IntN(cfg.ReadAheadBytes)
	}
	cfg.MaxAsideDevices = 1 + rng.IntN(4)
	m := &model{
		t: t, seed: seed, rng: rng, cfg: cfg,
		parts:     append(slices.Clone(modelNormal), modelHot...),
		now:       time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		committed: map[int]uint64{},
		finished:  map[Ref]bool{},
		dropped:   map[Ref]bool{},
		members:   map[MemberID]int{},
		counts:    map[string]int{},
	}
	m.store = newMemStore(m.parts...)
	m.build()
	return m
}

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d (%s/%s, deliver %s, read_ahead %d/%dB, max_deliver %d), instance %d: %s\nlast steps:\n  %s",
		m.seed, m.cfg.Ordering, m.cfg.Strategy, m.cfg.Deliver, m.cfg.ReadAheadMsgs, m.cfg.ReadAheadBytes, m.cfg.MaxDeliver,
		m.inst, fmt.Sprintf(format, args...), strings.Join(m.log, "\n  "))
}

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
	if len(m.log) > 40 {
		m.log = m.log[1:]
	}
}

// build starts a group instance from the committed offsets and re-adds the members.
func (m *model) build() {
	start := map[int]uint64{}
	for _, p := range m.parts {
		start[p] = 0
		if c, ok := m.committed[p]; ok {
			start[p] = c + 1
		}
	}
	g, err := New(m.cfg, start, rand.New(rand.NewPCG(m.seed, uint64(m.inst))))
	if err != nil {
		m.fail("new: %v", err)
	}
	m.g = g
	m.applyBudget()
	m.pending, m.fetched, m.tries, m.open = map[int]Fetch{}, map[Ref]bool{}, map[Ref]int{}, map[Ref]bool{}
	m.refetch = map[int]Fetch{}
	m.flight, m.termed, m.firstSeq = nil, map[Ref]bool{}, map[devKey]uint64{}
	m.sticky, m.instCommits = map[string]stickyRec{}, map[int]uint64{}
	m.draining, m.withdrawing, m.drained = false, false, false
	m.marks = map[int]uint64{}
	m.paused = map[int]bool{}
	m.epoch++
	ids := make([]MemberID, 0, len(m.members))
	for id := range m.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := g.AddMember(id, m.members[id], m.now); err != nil {
			m.fail("re-add %s: %v", id, err)
		}
	}
	m.pump()
}

func (m *model) run(steps int) {
	for i := range steps {
		m.step(i)
		m.pump()
		m.checkBounds()
	}
	m.quiesce()
}

func (m *model) step(i int) {
	if m.bud != nil && m.rng.IntN(40) == 0 {
		m.changeBudget()
		return
	}
	r := m.rng.IntN(1000)
	switch {
	case r < 250:
		m.publish()
	case r < 280:
		m.move()
	case r < 430:
		m.answerFetch(false)
	case r < 480:
		m.answerRefetch(false)
	case r < 680:
		m.acknowledge("ack")
	case r < 730:
		m.acknowledge("nak")
	case r < 760:
		m.acknowledge("wpi")
	case r < 780:
		m.acknowledge("term")
	case r < 800:
		m.staleAck()
	case r < 830:
		m.joinOrLeave()
	case r < 860:
		m.changeCredit()
	case r < 875:
		m.togglePause()
	case r < 985:
		m.advance(time.Duration(1+m.rng.IntN(40)) * time.Second)
	case r < 993:
		m.dropSome()
	case r < 997:
		m.restart()
	default:
		m.drainAndRestart()
	}
}

func (m *model) publish() {
	node := m.rng.IntN(2)
	dev := fmt.Sprintf("d%d", m.rng.IntN(40))
	if m.rng.IntN(10) == 0 {
		dev = fmt.Sprintf("f%d", m.rng.IntN(5)) // rejected by the filter where there is one
	}
	home := modelNormal[node*3+int(hashString(dev)%3)]
	rec := m.store.publish(node, dev, home, 1+m.rng.IntN(maxModelRecord))
	m.logf("publish %s %s#%d%s", rec.Ref(), dev, rec.Seq, moveSuffix(rec))
	if m.cfg.Filter != nil && !m.cfg.Filter(&rec) {
		m.finished[rec.Ref()] = true
	}
}

// move sends a device to its node's hot partition, or back home.
func (m *model) move() {
	node := m.rng.IntN(2)
	dev := fmt.Sprintf("d%d", m.rng.IntN(40))
	home := modelNormal[node*3+int(hashString(dev)%3)]
	pos := m.store.position(node, dev, home)
	target := modelHot[node]
	if pos.part == target {
		target = home
	}
	rec := m.store.move(node, dev, home, target)
	m.logf("move %s %s -> p%d", rec.Ref(), dev, target)
}

// answerFetch answers one outstanding fetch that has news (all of them when all is set),
// sometimes with fewer records than allowed, as a storage batch boundary would.
func (m *model) answerFetch(all bool) bool {
	answered := false
	for _, p := range m.parts {
		f, ok := m.pending[p]
		if !ok {
			continue
		}
		var msgs []Msg
		var next uint64
		switch {
		case f.End:
			next = m.store.end(p)
			// deliver new: what is stored now is before the group's start.
			for _, r := range m.store.parts[p].recs {
				if r.Kind == KindData && !m.finished[r.Ref()] {
					m.dropped[r.Ref()] = true
				}
			}
		case m.store.hasNews(p, f.From):
			maxMsgs, maxBytes := f.MaxMsgs, f.MaxBytes
			switch m.rng.IntN(10) {
			case 0, 1, 2: // a storage batch boundary: fewer records than allowed
				maxMsgs = 1 + m.rng.IntN(maxMsgs)
			case 3: // a runner that ignores the limits: the group must take only what fits
				maxMsgs, maxBytes = maxMsgs+1+m.rng.IntN(4), 1<<20
			}
			msgs, next = m.store.read(p, f.From, maxMsgs, maxBytes)
		default:
			continue
		}
		delete(m.pending, p)
		m.noteExempt(p)
		m.logf("fetched p%d from %d: %d records, next %d", p, f.From, len(msgs), next)
		if err := m.g.Fetched(p, msgs, next, m.now); err != nil {
			m.fail("fetched p%d: %v", p, err)
		}
		if !m.draining {
			for _, r := range msgs {
				m.fetched[r.Ref()] = true
			}
		}
		answered = true
		if !all {
			return true
		}
	}
	return answered
}

// answerRefetch answers one outstanding Refetch (all of them when all is
// set), sometimes cut short as a storage batch boundary would.
func (m *model) answerRefetch(all bool) bool {
	answered := false
	for _, p := range m.parts {
		f, ok := m.refetch[p]
		if !ok {
			continue
		}
		maxMsgs := f.MaxMsgs
		if m.rng.IntN(3) == 0 {
			maxMsgs = 1 + m.rng.IntN(maxMsgs)
		}
		msgs, next := m.store.read(p, f.From, maxMsgs, f.MaxBytes)
		delete(m.refetch, p)
		m.noteExempt(p)
		m.logf("refetched p%d from %d: %d records, next %d", p, f.From, len(msgs), next)
		if err := m.g.Refetched(p, msgs, next, m.now); err != nil {
			m.fail("refetched p%d: %v", p, err)
		}
		if !m.withdrawing { // a drain takes re-read records too
			for _, r := range msgs {
				m.fetched[r.Ref()] = true
			}
		}
		m.counts["refetches"]++
		answered = true
		if !all {
			return true
		}
	}
	return answered
}

func (m *model) acknowledge(kind string) {
	if len(m.flight) == 0 {
		return
	}
	i := m.rng.IntN(len(m.flight))
	f := m.flight[i]
	var err error
	switch kind {
	case "ack":
		err = m.g.Ack(f.member, f.ref, f.try, m.now)
	case "nak":
		delay := time.Duration(0)
		if m.rng.IntN(2) == 0 {
			delay = time.Duration(m.rng.IntN(30)) * time.Second
		}
		err = m.g.Nak(f.member, f.ref, f.try, delay, m.now)
		kind = fmt.Sprintf("nak(%v)", delay)
	case "wpi":
		err = m.g.InProgress(f.member, f.ref, f.try, m.now)
	case "term":
		m.termed[f.ref] = true
		err = m.g.Term(f.member, f.ref, f.try, m.now)
	}
	m.logf("%s %s %s try %d", kind, f.member, f.ref, f.try)
	if err != nil {
		m.fail("%s %s %s try %d: the model holds it in flight, the group says %v", kind, f.member, f.ref, f.try, err)
	}
	switch kind {
	case "ack":
		m.finished[f.ref] = true
		delete(m.open, f.ref)
		m.flight = slices.Delete(m.flight, i, i+1)
	case "wpi":
		m.flight[i].deadline = m.now.Add(m.cfg.AckWait)
	default:
		m.flight = slices.Delete(m.flight, i, i+1)
		if kind != "term" {
			m.windowFailed(f.device)
		}
	}
}

// staleAck sends an acknowledgement that must be ignored.
func (m *model) staleAck() {
	var member MemberID = "m0"
	ref := Ref{Partition: m.parts[m.rng.IntN(len(m.parts))], Offset: uint64(1 + m.rng.IntN(50))}
	try := 1
	if len(m.flight) > 0 {
		f := m.flight[m.rng.IntN(len(m.flight))]
		member, ref, try = f.member, f.ref, f.try+1+m.rng.IntN(2)
	}
	for _, f := range m.flight {
		if f.ref == ref && f.member == member && f.try == try {
			return // not stale after all
		}
	}
	m.logf("stale ack %s %s try %d", member, ref, try)
	before := m.g.Stats().StaleAcks
	if err := m.g.Ack(member, ref, try, m.now); !errors.Is(err, ErrStale) && !errors.Is(err, ErrDrained) {
		m.fail("stale ack %s %s try %d: want ErrStale, got %v", member, ref, try, err)
	}
	if !m.drained && m.g.Stats().StaleAcks != before+1 {
		m.fail("stale ack not counted")
	}
}

func (m *model) joinOrLeave() {
	id := MemberID(fmt.Sprintf("m%d", m.rng.IntN(5)))
	if credit, ok := m.members[id]; ok {
		m.logf("leave %s", id)
		if err := m.g.RemoveMember(id, m.now); err != nil && !m.drained {
			m.fail("leave %s: %v", id, err)
		}
		delete(m.members, id)
		var left []string
		m.flight = slices.DeleteFunc(m.flight, func(f flight) bool {
			if f.member == id {
				left = append(left, f.device)
			}
			return f.member == id
		})
		m.windowFailed(left...)
		if credit > 0 {
			m.epoch++
		}
		return
	}
	credit := m.rng.IntN(6)
	m.logf("join %s credit %d", id, credit)
	if err := m.g.AddMember(id, credit, m.now); err != nil && !m.drained {
		m.fail("join %s: %v", id, err)
	}
	m.members[id] = credit
	if credit > 0 {
		m.epoch++
	}
}

func (m *model) changeCredit() {
	ids := m.memberIDs()
	if len(ids) == 0 {
		return
	}
	id := ids[m.rng.IntN(len(ids))]
	credit := m.rng.IntN(6)
	m.logf("credit %s %d", id, credit)
	if err := m.g.SetCredit(id, credit, m.now); err != nil && !m.drained {
		m.fail("credit %s: %v", id, err)
	}
	if (credit > 0) != (m.members[id] > 0) {
		m.epoch++
		if credit == 0 {
			m.windowPaused(id)
		}
	}
	m.members[id] = credit
}

func (m *model) memberIDs() []MemberID {
	ids := make([]MemberID, 0, len(m.members))
	for id := range m.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// advance moves the clock and ticks; deliveries past their deadline leave flight.
func (m *model) advance(d time.Duration) {
	m.now = m.now.Add(d)
	m.logf("tick +%v", d)
	var expired []string
	m.flight = slices.DeleteFunc(m.flight, func(f flight) bool {
		if !f.deadline.After(m.now) {
			m.counts["timeouts"]++
			expired = append(expired, f.device)
			return true
		}
		return false
	})
	m.windowFailed(expired...)
	if err := m.g.Tick(m.now); err != nil && !m.drained {
		m.fail("tick: %v", err)
	}
}

// dropSome applies retention to a random partition, as drop_oldest would.
func (m *model) dropSome() {
	p := m.parts[m.rng.IntN(len(m.parts))]
	mp := m.store.parts[p]
	before := mp.first + uint64(m.rng.IntN(5))
	for off := mp.first; off < min(before, m.store.end(p)); off++ {
		if r := mp.recs[off-1]; r.Kind == KindData && !m.finished[r.Ref()] {
			m.dropped[r.Ref()] = true
			m.counts["dropped unfinished"]++
		}
	}
	m.store.drop(p, before)
	m.logf("drop p%d before %d", p, before)
}

func (m *model) restart() {
	m.counts["restarts"]++
	m.counts["evicted"] += int(m.g.Stats().Evicted)
	m.logf("restart from %v", m.committed)
	m.inst++
	m.build()
}

func (m *model) drainAndRestart() {
	drain := m.g.Drain
	if m.withdrawing = m.rng.IntN(3) == 0; m.withdrawing {
		drain = m.g.Withdraw
		m.counts["withdraws"]++
	}
	m.logf("drain (withdraw %v)", m.withdrawing)
	if err := drain(m.now.Add(10*time.Second), m.now); err != nil {
		m.fail("drain: %v", err)
	}
	m.draining = true
	m.pump()
	for i := 0; !m.drained; i++ {
		if i > 100 {
			m.fail("drain did not complete")
		}
		switch r := m.rng.IntN(4); {
		case r < 2 && len(m.flight) > 0:
			m.acknowledge("ack")
		case r == 2 && len(m.refetch) > 0:
			m.answerRefetch(false)
		default:
			m.advance(time.Duration(1+m.rng.IntN(5)) * time.Second)
		}
		m.pump()
	}
	m.restart()
}

// pump takes every action out of the group and checks it.
func (m *model) pump() {
	for range 1000 {
		rd := m.g.Ready()
		for _, dl := range rd.DeadLetter {
			m.onDeadLetter(dl)
		}
		for _, d := range rd.Deliver {
			m.onDeliver(d)
		}
		for _, f := range rd.Fetch {
			if f.Refetch {
				if _, dup := m.refetch[f.Partition]; dup {
					m.fail("second outstanding refetch for p%d", f.Partition)
				}
				if m.withdrawing {
					m.fail("refetch while withdrawing: %+v", f)
				}
				if m.draining {
					m.counts["re-reads while draining"]++
				}
				m.logf("refetch p%d from %d max %d", f.Partition, f.From, f.MaxMsgs)
				m.refetch[f.Partition] = f
				continue
			}
			if _, dup := m.pending[f.Partition]; dup {
				m.fail("second outstanding fetch for p%d", f.Partition)
			}
			if m.draining {
				m.fail("fetch while draining: %+v", f)
			}
			m.pending[f.Partition] = f
		}
		for _, c := range rd.Commit {
			m.onCommit(c)
		}
		if rd.Drained {
			if !m.draining {
				m.fail("drained without drain")
			}
			m.drained = true
		}
		if !m.g.HasReady() {
			return
		}
	}
	m.fail("Ready never runs dry")
}

func (m *model) onDeliver(d Delivery) {
	ref := d.Msg.Ref()
	m.logf("deliver %s %s#%d try %d -> %s", ref, d.Msg.Device, d.Msg.Seq, d.Deliveries, d.Member)
	switch {
	case m.withdrawing:
		m.fail("delivery while withdrawing: %s", ref)
	case m.draining && ref.Offset > m.marks[ref.Partition]:
		m.fail("delivery while draining above the mark p%d@%d: %s", ref.Partition, m.marks[ref.Partition], ref)
	case m.draining:
		m.counts["gaps filled by a drain"]++
	}
	m.marks[ref.Partition] = max(m.marks[ref.Partition], ref.Offset)
	if m.paused[ref.Partition] {
		m.fail("delivered %s of a paused partition", ref)
	}
	rec, ok := m.store.record(ref)
	if !ok || !m.fetched[ref] {
		m.fail("delivered %s, which this instance never fetched", ref)
	}
	if rec.Kind != KindData || rec.Device != d.Msg.Device || rec.Seq != d.Msg.Seq || (string(rec.Data) != string(d.Msg.Data) && !m.releasedData(d)) {
		m.fail("delivered %s does not match storage: %+v", ref, d.Msg)
	}
	if m.releasedData(d) {
		m.counts["redeliveries read again"]++
	}
	if m.cfg.Filter != nil && !m.cfg.Filter(&rec) {
		m.fail("delivered %s, which the filter rejects", ref)
	}
	if want := m.tries[ref] + 1; d.Deliveries != want {
		m.fail("delivered %s with count %d, want %d", ref, d.Deliveries, want)
	}
	if d.Deliveries > m.cfg.MaxDeliver {
		m.fail("delivered %s a %dth time, max_deliver %d", ref, d.Deliveries, m.cfg.MaxDeliver)
	}
	credit, ok := m.members[d.Member]
	if !ok {
		m.fail("delivered %s to %s, not a member", ref, d.Member)
	}
	held := 0
	for _, f := range m.flight {
		if f.member == d.Member {
			held++
		}
		if f.ref == ref {
			m.fail("delivered %s again while attempt %d is in flight", ref, f.try)
		}
	}
	if held >= credit {
		m.fail("delivered %s to %s holding %d with credit %d", ref, d.Member, held, credit)
	}
	key := devKey{nodeOf(ref.Partition), rec.Device}
	if m.win != nil {
		m.checkWindowDelivery(d, rec, key)
		if d.Deliveries == 1 {
			if last := m.firstSeq[key]; rec.Seq <= last {
				m.fail("first delivery of %s#%d after #%d: out of order", rec.Device, rec.Seq, last)
			}
			m.firstSeq[key] = rec.Seq
		}
	} else if m.cfg.Ordering == OrderPerDevice {
		for other := range m.open {
			if other == ref {
				continue
			}
			if o, _ := m.store.record(other); o.Device == rec.Device {
				m.fail("delivered %s of %s while %s of the same device is unfinished", ref, rec.Device, other)
			}
		}
		if d.Deliveries == 1 {
			if last := m.firstSeq[key]; rec.Seq <= last {
				m.fail("first delivery of %s#%d after #%d: out of order", rec.Device, rec.Seq, last)
			}
			m.firstSeq[key] = rec.Seq
			m.checkEarlierDone(key, rec)
		}
	}
	// With a device window a run stays with its holder across a membership
	// change (checkWindowDelivery checks the single holder instead).
	if m.cfg.Strategy == StrategySticky && d.Deliveries == 1 && m.win == nil {
		if s, ok := m.sticky[rec.Device]; ok && s.epoch == m.epoch && s.member != d.Member {
			m.fail("sticky: %s went to %s, before to %s, membership unchanged", rec.Device, d.Member, s.member)
		}
		m.sticky[rec.Device] = stickyRec{d.Member, m.epoch}
	}
	m.counts["deliveries"]++
	if !rec.MoveRef.IsZero() {
		m.counts["deliveries after a move"]++
	}
	m.tries[ref] = d.Deliveries
	m.open[ref] = true
	m.flight = append(m.flight, flight{member: d.Member, ref: ref, try: d.Deliveries, device: rec.Device,
		deadline: m.now.Add(m.cfg.AckWait)})
}

// checkEarlierDone: every earlier record of the device on its node is finished or gone.
func (m *model) checkEarlierDone(key devKey, rec Msg) {
	for _, p := range m.parts {
		if nodeOf(p) != key.node {
			continue
		}
		for _, r := range m.store.parts[p].recs {
			if r.Kind == KindData && r.Device == rec.Device && r.Seq < rec.Seq {
				if !m.finished[r.Ref()] && !m.dropped[r.Ref()] {
					m.fail("first delivery of %s#%d (%s) before #%d (%s) finished",
						rec.Device, rec.Seq, rec.Ref(), r.Seq, r.Ref())
				}
			}
		}
	}
}

func (m *model) onDeadLetter(dl DeadLetter) {
	ref := dl.Msg.Ref()
	m.logf("dead %s try %d: %s", ref, dl.Deliveries, dl.Reason)
	if dl.Deliveries != m.tries[ref] {
		m.fail("dead letter %s with count %d, model %d", ref, dl.Deliveries, m.tries[ref])
	}
	switch dl.Reason {
	case ReasonTerm:
		if !m.termed[ref] {
			m.fail("dead letter %s as termed, never termed", ref)
		}
	case ReasonMaxDeliver:
		if dl.Deliveries < m.cfg.MaxDeliver {
			m.fail("dead letter %s after %d deliveries, max_deliver %d", ref, dl.Deliveries, m.cfg.MaxDeliver)
		}
	default:
		m.fail("dead letter %s with reason %v", ref, dl.Reason)
	}
	for _, f := range m.flight {
		if f.ref == ref {
			m.fail("dead letter %s while in flight", ref)
		}
	}
	m.counts["dead letters"]++
	m.finished[ref] = true
	delete(m.open, ref)
}

func (m *model) onCommit(c Commit) {
	m.logf("commit p%d=%d", c.Partition, c.Offset)
	prev, seen := m.instCommits[c.Partition]
	if seen && c.Offset <= prev {
		m.fail("commit p%d=%d does not advance from %d", c.Partition, c.Offset, prev)
	}
	if c.Offset >= m.store.end(c.Partition) {
		m.fail("commit p%d=%d beyond the end %d", c.Partition, c.Offset, m.store.end(c.Partition))
	}
	for off := uint64(1); off <= c.Offset; off++ {
		r := m.store.parts[c.Partition].recs[off-1]
		if r.Kind == KindData && !m.finished[r.Ref()] && !m.dropped[r.Ref()] {
			m.fail("commit p%d=%d passes unfinished %s (%s#%d)", c.Partition, c.Offset, r.Ref(), r.Device, r.Seq)
		}
	}
	m.counts["commits"]++
	m.instCommits[c.Partition] = c.Offset
	m.committed[c.Partition] = max(m.committed[c.Partition], c.Offset)
}

func (m *model) checkBounds() {
	if m.drained {
		return
	}
	s := m.g.Stats()
	total := 0
	shareMsgs, _ := m.cfg.deviceShare()
	for _, p := range s.Partitions {
		if p.Held > m.cfg.ReadAheadMsgs {
			m.fail("p%d holds %d records, above read_ahead %d", p.Partition, p.Held, m.cfg.ReadAheadMsgs)
		}
		if p.Span > m.cfg.ReadAheadMsgs && p.SetAside == 0 && p.Asides == 0 {
			m.fail("p%d window span %d above read_ahead %d with nothing set aside", p.Partition, p.Span, m.cfg.ReadAheadMsgs)
		}
		if m.cfg.Ordering == OrderPerDevice && p.Busiest > shareMsgs {
			m.fail("p%d: a device holds %d records, share %d", p.Partition, p.Busiest, shareMsgs)
		}
		if p.Asides > m.cfg.MaxAsideDevices {
			m.fail("p%d: %d aside devices, max %d", p.Partition, p.Asides, m.cfg.MaxAsideDevices)
		}
		if p.SetAside > 0 {
			m.counts["steps with records set aside"]++
		}
		// A fetch is asked for only below the byte budget and takes at least
		// one record, so the budget is exceeded by less than one record.
		if p.Bytes >= m.cfg.ReadAheadBytes+maxModelRecord {
			m.fail("p%d holds %d bytes, budget %d", p.Partition, p.Bytes, m.cfg.ReadAheadBytes)
		}
		total += m.cfg.ReadAheadMsgs
	}
	if s.InFlight+s.Pending > total || s.ActiveDevices > total+m.cfg.MaxAsideDevices*len(m.parts) {
		m.fail("held %d+%d messages, %d devices, above the read-ahead %d", s.InFlight, s.Pending, s.ActiveDevices, total)
	}
	for _, p := range s.Partitions {
		if p.Span == m.cfg.ReadAheadMsgs {
			m.counts["steps with a full window"]++
			break
		}
	}
	m.checkBudget(s)
	if s.InFlight != len(m.flight) {
		m.fail("group has %d in flight, model %d", s.InFlight, len(m.flight))
	}
}

// quiesce makes sure a member can take work, then acks everything until
// every stored record is finished and every commit reached the end.
// togglePause pauses or resumes a random partition (a leader losing and
// regaining the node that owns it).
func (m *model) togglePause() {
	if m.draining {
		return
	}
	p := m.parts[m.rng.IntN(len(m.parts))]
	pause := !m.paused[p]
	m.logf("pause p%d %v", p, pause)
	if err := m.g.Pause(p, pause, m.now); err != nil {
		m.fail("pause p%d: %v", p, err)
	}
	m.paused[p] = pause
	m.counts["pause"]++
}

func (m *model) quiesce() {
	if m.draining {
		m.restart()
	}
	for p, paused := range m.paused {
		if paused {
			if err := m.g.Pause(p, false, m.now); err != nil {
				m.fail("resume p%d: %v", p, err)
			}
			m.paused[p] = false
		}
	}
	if len(m.members) == 0 || !slices.ContainsFunc(m.memberIDs(), func(id MemberID) bool { return m.members[id] > 0 }) {
		m.members["q"] = 3
		m.epoch++
		if err := m.g.AddMember("q", 3, m.now); err != nil {
			m.fail("add q: %v", err)
		}
	}
	for round := 0; ; round++ {
		m.pump()
		for m.answerFetch(true) || m.answerRefetch(true) {
			m.pump()
		}
		for len(m.flight) > 0 {
			m.acknowledge("ack")
			m.pump()
		}
		if m.allDone() {
			return
		}
		if round > 2000 {
			m.fail("not everything finished: %s", m.describeLeft())
		}
		m.advance(m.cfg.MaxNakDelay)
		m.pump()
	}
}

func (m *model) allDone() bool {
	for _, p := range m.parts {
		if m.committed[p] != m.store.end(p)-1 {
			return false
		}
	}
	return true
}

func (m *model) describeLeft() string {
	var b strings.Builder
	for _, p := range m.parts {
		fmt.Fprintf(&b, "p%d committed %d end %d; ", p, m.committed[p], m.store.end(p))
	}
	fmt.Fprintf(&b, "stats %+v", m.g.Stats())
	return b.String()
}
