package election

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// A simulated cluster for scripts and randomized runs: several machines, a
// network that delivers messages after a delay, keeps each connection FIFO
// (like the TCP peer connections), can drop, stall and partition, a failure
// detector that reports PeerUp/PeerDown from connectivity, and a runner per
// node that carries out Ready (persist, lead, step down, drain). It checks
// the invariants after every input and records violations.

type simNode struct {
	id         NodeID
	prio       int
	m          *Machine // nil while down
	inc        int      // incarnation: connections do not survive a restart
	persisted  map[string]Epoch
	view       map[NodeID]bool  // peers this node's failure detector reported up
	leading    map[string]Epoch // the runner's leaderships (BecomeLeader until StepDown)
	drainHold  bool             // drains are not reported until release
	drainDelay int              // ticks a drain takes (scripts)
	// Kept across restarts, for the invariants:
	highest  map[string]Epoch // highest epoch the machine reported per group
	accepted map[string]Epoch // as partition owner: newest epoch whose fetch was served
}

type envelope struct {
	at, seq        int
	msg            Message
	fromInc, toInc int
	fetch          bool // a leader's fetch from the owner To; Epoch is the leadership
}

type pendingDrain struct {
	at    int
	node  NodeID
	inc   int
	group string
	epoch Epoch
}

type cluster struct {
	base     Config
	now      int
	nodes    []*simNode // by id
	groups   []string
	queue    []envelope // by (at, seq)
	seq      int
	lastAt   map[[2]NodeID]int // FIFO per connection
	stalled  map[[2]NodeID]bool
	side     map[NodeID]int // partition side; absent = 0
	drains   []pendingDrain
	rng      *rand.Rand // nil: scripted (no drops, delay 1, drains after drainDelay)
	dropRate int        // per mille, random runs only
	maxDelay int        // random runs: delays in [1, maxDelay]
	lazyFD   bool       // random runs: the failure detector lags (per pair, coin flips)
	fetches  bool       // leaders fetch from random owners, who Fence

	trace      map[string]bool // "msgs", "persist", "fd", "drops"
	out        strings.Builder
	ballots    map[string]map[Epoch]NodeID // every BecomeLeader carried out
	violations []string
}

func newCluster(base Config, groups []string, rng *rand.Rand) *cluster {
	slices.Sort(groups)
	return &cluster{
		base: base, groups: groups, rng: rng, maxDelay: 1,
		lastAt: map[[2]NodeID]int{}, stalled: map[[2]NodeID]bool{}, side: map[NodeID]int{},
		trace: map[string]bool{}, ballots: map[string]map[Epoch]NodeID{},
	}
}

func (c *cluster) logf(format string, args ...any) {
	fmt.Fprintf(&c.out, "t%d ", c.now)
	fmt.Fprintf(&c.out, format+"\n", args...)
}

func (c *cluster) violate(format string, args ...any) {
	v := fmt.Sprintf("t%d VIOLATION: ", c.now) + fmt.Sprintf(format, args...)
	c.violations = append(c.violations, v)
	c.out.WriteString(v + "\n")
}

func (c *cluster) node(id NodeID) *simNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (c *cluster) up() []*simNode {
	var up []*simNode
	for _, n := range c.nodes {
		if n.m != nil {
			up = append(up, n)
		}
	}
	return up
}

// addNode creates a node (down); start brings it up.
func (c *cluster) addNode(id NodeID, prio int) *simNode {
	n := &simNode{
		id: id, prio: prio, drainDelay: 2,
		persisted: map[string]Epoch{}, highest: map[string]Epoch{}, accepted: map[string]Epoch{},
	}
	i, _ := slices.BinarySearchFunc(c.nodes, id, func(a *simNode, id NodeID) int { return strings.Compare(string(a.id), string(id)) })
	c.nodes = slices.Insert(c.nodes, i, n)
	return n
}

// start (re)starts a node as its runner does: a new machine, every group
// added with its persisted epoch.
func (c *cluster) start(n *simNode) error {
	cfg := c.base
	cfg.ID, cfg.Priority = n.id, n.prio
	m, err := New(cfg)
	if err != nil {
		return err
	}
	n.m, n.inc, n.view, n.leading = m, n.inc+1, map[NodeID]bool{}, map[string]Epoch{}
	for _, g := range c.groups {
		if err := m.AddGroup(g, n.persisted[g]); err != nil {
			return err
		}
	}
	c.process(n)
	return nil
}

// crash stops a node: its machine, its runner's leaderships and its
// connections are gone; what it persisted stays.
func (c *cluster) crash(n *simNode) {
	n.m, n.view, n.leading = nil, nil, nil
}

func (c *cluster) connected(a, b *simNode) bool {
	return a.m != nil && b.m != nil && c.side[a.id] == c.side[b.id]
}

// syncFD lets every live node's failure detector catch up with the truth:
// all at once, or (lazyFD) each stale pair with probability 1/2.
func (c *cluster) syncFD(lazy bool) {
	for _, o := range c.nodes {
		if o.m == nil {
			continue
		}
		for _, p := range c.nodes {
			if p == o {
				continue
			}
			truth := c.connected(o, p)
			if lazy && truth && o.view[p.id] && c.rng.IntN(2000) == 0 {
				truth = false // a false suspicion, corrected by a later sync
			}
			if o.view[p.id] == truth || (lazy && c.rng.IntN(2) == 0) {
				continue
			}
			var err error
			if truth {
				err = o.m.PeerUp(p.id, p.prio)
				o.view[p.id] = true
			} else {
				err = o.m.PeerDown(p.id)
				delete(o.view, p.id)
			}
			if err != nil {
				c.violate("%s: failure detector input: %v", o.id, err)
			}
			if c.trace["fd"] {
				c.logf("%s: peer %s %s", o.id, p.id, map[bool]string{true: "up", false: "down"}[truth])
			}
			c.process(o)
		}
	}
}

// process carries out a node's Ready in the documented order and checks
// the node's invariants.
func (c *cluster) process(n *simNode) {
	rd := n.m.Ready()
	if len(rd.Persist) > 0 {
		var b []string
		for _, p := range rd.Persist {
			n.persisted[p.Group] = p.Epoch
			b = append(b, p.Group+"="+p.Epoch.String())
		}
		if c.trace["persist"] {
			c.logf("%s: persist %s", n.id, strings.Join(b, " "))
		}
	}
	for _, ch := range rd.Changes {
		if n.persisted[ch.Group].Compare(ch.Epoch) < 0 {
			c.violate("%s: %v %s %v before its epoch was persisted", n.id, ch.Kind, ch.Group, ch.Epoch)
		}
		switch ch.Kind {
		case BecomeLeader:
			c.logf("%s: lead %s %v", n.id, ch.Group, ch.Epoch)
			if c.ballots[ch.Group] == nil {
				c.ballots[ch.Group] = map[Epoch]NodeID{}
			}
			if prev, ok := c.ballots[ch.Group][ch.Epoch]; ok {
				c.violate("%s: second leadership of %s at %v (first: %s)", n.id, ch.Group, ch.Epoch, prev)
			}
			if ch.Epoch.Leader != n.id {
				c.violate("%s: leads %s at another node's epoch %v", n.id, ch.Group, ch.Epoch)
			}
			c.ballots[ch.Group][ch.Epoch] = n.id
			if old, ok := n.leading[ch.Group]; ok {
				c.violate("%s: lead %s %v while leading at %v", n.id, ch.Group, ch.Epoch, old)
			}
			n.leading[ch.Group] = ch.Epoch
		case StepDown:
			how := "deposed"
			if ch.HandOver {
				how = "hand-over"
			}
			c.logf("%s: step-down %s %v %s", n.id, ch.Group, ch.Epoch, how)
			if n.leading[ch.Group] != ch.Epoch {
				c.violate("%s: step-down %s %v but leading at %v", n.id, ch.Group, ch.Epoch, n.leading[ch.Group])
			}
			delete(n.leading, ch.Group)
			if ch.HandOver {
				delay := n.drainDelay
				if c.rng != nil {
					delay = c.rng.IntN(2*c.base.HandOverTimeout + 1)
					if c.rng.IntN(8) == 0 {
						delay = 1 << 30 // a hung runner never finishes its drain
					}
				}
				c.drains = append(c.drains, pendingDrain{at: c.now + delay, node: n.id, inc: n.inc, group: ch.Group, epoch: ch.Epoch})
			}
		}
	}
	for _, msg := range rd.Messages {
		if msg.Epoch.Compare(n.persisted[msg.Group]) > 0 {
			c.violate("%s: sends epoch %v of %s beyond the persisted %v", n.id, msg.Epoch, msg.Group, n.persisted[msg.Group])
		}
		c.send(n, msg, false)
	}
	c.checkNode(n)
}

func (c *cluster) checkNode(n *simNode) {
	for _, g := range c.groups {
		st, ok := n.m.Status(g)
		if !ok {
			continue
		}
		if st.Epoch.Compare(n.highest[g]) < 0 {
			c.violate("%s: epoch of %s went back from %v to %v", n.id, g, n.highest[g], st.Epoch)
		}
		n.highest[g] = st.Epoch
		led, leading := n.leading[g]
		isLeader := st.Role == RoleLeader
		if isLeader != leading || (leading && (led != st.Epoch || st.Leader != n.id)) {
			c.violate("%s: %s role %v epoch %v but runner leading=%v at %v", n.id, g, st.Role, st.Epoch, leading, led)
		}
	}
}

func (c *cluster) send(from *simNode, msg Message, fetch bool) {
	to := c.node(msg.To)
	if to == nil {
		c.violate("%s: message to unknown node %q", from.id, msg.To)
		return
	}
	delay := 1
	if c.rng != nil && c.maxDelay > 1 {
		delay = 1 + c.rng.IntN(c.maxDelay)
	}
	key := [2]NodeID{from.id, to.id}
	at := max(c.now+delay, c.lastAt[key])
	c.lastAt[key] = at
	c.seq++
	c.queue = append(c.queue, envelope{at: at, seq: c.seq, msg: msg, fromInc: from.inc, toInc: to.inc, fetch: fetch})
	if c.trace["msgs"] && !fetch {
		c.logf("%s->%s %v %s %v", from.id, to.id, msg.Type, msg.Group, msg.Epoch)
	}
}

// tick advances the cluster by one tick: deliver the due messages, report
// the due drains, tick every machine, let leaders fetch, sync the failure
// detector.
func (c *cluster) tick() {
	c.now++
	slices.SortFunc(c.queue, func(a, b envelope) int {
		if a.at != b.at {
			return a.at - b.at
		}
		return a.seq - b.seq
	})
	var keep []envelope
	due := c.queue
	c.queue = nil
	for _, e := range due {
		if e.at > c.now || c.stalled[[2]NodeID{e.msg.From, e.msg.To}] {
			keep = append(keep, e)
			continue
		}
		c.deliver(e)
	}
	c.queue = append(keep, c.queue...)
	var later []pendingDrain
	for _, d := range c.drains {
		n := c.node(d.node)
		switch {
		case n.m == nil || n.inc != d.inc:
			// the runner died with its drain
		case d.at > c.now || n.drainHold:
			later = append(later, d)
		default:
			c.reportDrained(n, d)
		}
	}
	c.drains = later
	for _, n := range c.up() {
		n.m.Tick()
		c.process(n)
	}
	if c.fetches {
		c.fetchAll()
	}
	if c.lazyFD {
		c.syncFD(true)
	}
}

func (c *cluster) reportDrained(n *simNode, d pendingDrain) {
	err := n.m.Drained(d.group, d.epoch)
	switch {
	case err == nil:
		c.logf("%s: drained %s %v", n.id, d.group, d.epoch)
	case errors.Is(err, ErrNotHandingOver):
		c.logf("%s: drained %s %v (no longer handing over)", n.id, d.group, d.epoch)
	default:
		c.violate("%s: drained: %v", n.id, err)
	}
	c.process(n)
}

func (c *cluster) deliver(e envelope) {
	from, to := c.node(e.msg.From), c.node(e.msg.To)
	reason := ""
	switch {
	case to.m == nil || to.inc != e.toInc || c.side[from.id] != c.side[to.id]:
		// A message already on the wire still arrives after its sender
		// crashed (perhaps after the failure detector declared it dead);
		// one to a node that restarted since does not.
		reason = "disconnected"
	case c.rng != nil && c.rng.IntN(1000) < c.dropRate:
		reason = "lost"
	}
	if reason != "" {
		if c.trace["drops"] {
			c.logf("%s->%s %v %s %v dropped (%s)", from.id, to.id, e.msg.Type, e.msg.Group, e.msg.Epoch, reason)
		}
		return
	}
	if e.fetch {
		c.fence(to, e.msg.Group, e.msg.Epoch, from.id)
		return
	}
	err := to.m.Step(e.msg)
	switch {
	case err == nil:
	case errors.Is(err, ErrStaleEpoch):
		c.logf("%s: refused %v %s %v from %s: stale", to.id, e.msg.Type, e.msg.Group, e.msg.Epoch, from.id)
	default:
		c.violate("%s: step %v from %s: %v", to.id, e.msg.Type, from.id, err)
	}
	c.process(to)
}

// fence is a partition owner receiving a fetch from the leader of epoch.
// The owner serves it only after the Ready is carried out (persist first);
// what it served must never go back, across restarts too.
func (c *cluster) fence(owner *simNode, group string, epoch Epoch, from NodeID) bool {
	err := owner.m.Fence(group, epoch)
	c.process(owner)
	if err != nil {
		if !errors.Is(err, ErrStaleEpoch) {
			c.violate("%s: fence: %v", owner.id, err)
		}
		if c.trace["fence"] {
			c.logf("%s: refused fetch %s %v from %s", owner.id, group, epoch, from)
		}
		return false
	}
	if owner.accepted[group].Compare(epoch) > 0 {
		c.violate("%s: served %s %v after serving %v", owner.id, group, epoch, owner.accepted[group])
	}
	if owner.persisted[group].Compare(epoch) < 0 {
		c.violate("%s: served %s %v before persisting it", owner.id, group, epoch)
	}
	owner.accepted[group] = epoch
	return true
}

// fetchAll: every runner that leads a group fetches from one random owner.
func (c *cluster) fetchAll() {
	for _, n := range c.up() {
		for _, g := range c.groups {
			e, ok := n.leading[g]
			if !ok || len(c.nodes) < 2 {
				continue
			}
			owner := c.nodes[c.rng.IntN(len(c.nodes))]
			if owner == n {
				continue
			}
			c.send(n, Message{Group: g, From: n.id, To: owner.id, Epoch: e}, true)
		}
	}
}

// best returns the highest-ranked live node of group.
func (c *cluster) best(group string) *simNode {
	var best *simNode
	var br Rank
	for _, n := range c.up() {
		if r := RankOf(n.id, n.prio, group); best == nil || r.Above(br) {
			best, br = n, r
		}
	}
	return best
}

// converged checks that every group has exactly one leader, the
// highest-ranked live node, which every live node follows at its epoch.
// It returns one line per group, and whether all groups converged.
func (c *cluster) converged() ([]string, bool) {
	var lines []string
	all := true
	for _, g := range c.groups {
		best := c.best(g)
		if best == nil {
			lines = append(lines, g+": no live node")
			continue
		}
		st, _ := best.m.Status(g)
		var bad []string
		if st.Role != RoleLeader {
			bad = append(bad, fmt.Sprintf("%s (highest-ranked) is %v", best.id, st.Role))
		}
		for _, n := range c.up() {
			if n == best {
				continue
			}
			ns, _ := n.m.Status(g)
			if ns.Role != RoleFollower || ns.Leader != best.id || ns.Epoch != st.Epoch {
				bad = append(bad, fmt.Sprintf("%s is %v of %q at %v", n.id, ns.Role, ns.Leader, ns.Epoch))
			}
		}
		if len(bad) == 0 {
			lines = append(lines, fmt.Sprintf("%s: %s leads at %v, all agree", g, best.id, st.Epoch))
		} else {
			all = false
			lines = append(lines, fmt.Sprintf("%s: NOT CONVERGED: %s", g, strings.Join(bad, "; ")))
		}
	}
	return lines, all
}
