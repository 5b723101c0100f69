package election

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

var (
	randomSeed  = flag.Uint64("seed", 0, "run the randomized test with this one seed (0: many seeds)")
	randomSeeds = flag.Int("seeds", 300, "number of seeds of the randomized test")
)

// randomConfig is small so that timeouts fire often within a run.
func randomConfig() Config {
	cfg := DefaultConfig("x")
	cfg.AnswerTimeout = 2
	cfg.CoordinatorTimeout = 5
	cfg.HandOverTimeout = 12
	cfg.AnnounceInterval = 6
	return cfg
}

// stableTicks is how long a healed, loss-free network with settled failure
// detectors must run before every group has converged. It is derived from
// the worst chain after the heal: an announcement interval for every node
// to hear the newest leader (a stale one steps down), a failed election
// round, a take-over bounded by the hand-over timeout, and the final
// COORDINATOR, each with message delays; doubled for margin.
func stableTicks(cfg Config, maxDelay int) int {
	round := cfg.AnnounceInterval + cfg.AnswerTimeout + cfg.CoordinatorTimeout + cfg.HandOverTimeout + 4*maxDelay
	return 2 * round
}

// TestRandomClusters runs many seeded simulations: nodes with random
// priorities (ties are common, so the hash decides), groups, message loss
// and delay, partitions, crashes and restarts from persisted epochs, late
// joiners, drains that outlast the hand-over timeout or never end, restarts
// quicker than the failure detector, and a failure detector that lags and
// now and then suspects a live peer. Leaders fetch from random owners, which Fence.
// Throughout: at most one leadership per group and epoch, epochs never go
// back on any node (across restarts too), an owner never serves an older
// epoch after a newer one, nothing leads or sends an epoch before it is
// persisted. After each chaotic phase the network heals and stays stable
// for stableTicks: every group must then have exactly one leader, the
// highest-ranked live node, that every live node follows at its epoch.
// Each run is reproducible from its seed (printed on failure; rerun with
// -seed=N, add -v for the transcript).
func TestRandomClusters(t *testing.T) {
	var seeds []uint64
	if *randomSeed != 0 {
		seeds = []uint64{*randomSeed}
	} else {
		n := *randomSeeds
		if testing.Short() {
			n = 30
		}
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	totals := map[string]uint64{}
	for _, seed := range seeds {
		c, counts := runRandom(seed)
		if len(c.violations) > 0 {
			t.Errorf("seed %d: %d violations, first: %s", seed, len(c.violations), c.violations[0])
			if *randomSeed != 0 {
				t.Logf("transcript:\n%s", c.out.String())
			}
			return
		}
		if c.failed != "" {
			t.Errorf("seed %d: %s", seed, c.failed)
			if *randomSeed != 0 {
				t.Logf("transcript:\n%s", c.out.String())
			}
			return
		}
		for k, v := range counts {
			totals[k] += v
		}
	}
	t.Logf("%d seeds: %v", len(seeds), totals)
	// The runs must exercise what they claim to test.
	for _, k := range []string{"leaderships", "take-overs", "hand-overs", "hand-over timeouts", "drain timeouts", "deposed", "stale", "fenced", "crashes", "quick restarts", "partitions", "joins"} {
		if totals[k] == 0 && len(seeds) >= 30 {
			t.Errorf("no %s in %d seeds: the randomized test does not exercise them", k, len(seeds))
		}
	}
}

type randomRun struct {
	*cluster
	failed string
}

// runRandom runs one seeded simulation and returns the cluster (its
// violations and transcript) and counters of what happened.
func runRandom(seed uint64) (*randomRun, map[string]uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xe1ec))
	cfg := randomConfig()
	ngroups := 2 + rng.IntN(4)
	var groups []string
	for i := range ngroups {
		groups = append(groups, fmt.Sprintf("g%d", i+1))
	}
	c := &randomRun{cluster: newCluster(cfg, groups, rng)}
	c.maxDelay, c.lazyFD, c.fetches = 3, true, true
	c.trace["fence"] = true
	counts := map[string]uint64{}

	nnodes := 3 + rng.IntN(4)
	for i := range nnodes {
		c.addNode(NodeID(fmt.Sprintf("n%d", i+1)), rng.IntN(3))
	}
	var reserve []*simNode // late joiners, possibly of a higher priority
	for i, n := range c.nodes {
		if i > 0 && rng.IntN(4) == 0 {
			reserve = append(reserve, n)
			continue
		}
		if err := c.start(n); err != nil {
			c.failed = err.Error()
			return c, counts
		}
	}
	c.syncFD(false)

	for cycle := range 3 {
		c.dropRate = []int{0, 50, 200}[rng.IntN(3)]
		for range 150 + rng.IntN(150) {
			c.chaos(&reserve, counts)
			c.tick()
		}
		// Heal: one network, no loss, failure detectors settled.
		c.side, c.dropRate, c.lazyFD = map[NodeID]int{}, 0, false
		c.syncFD(false)
		for range stableTicks(cfg, c.maxDelay) {
			c.tick()
		}
		lines, ok := c.converged()
		c.out.WriteString(fmt.Sprintf("t%d cycle %d converged=%v\n  %s\n", c.now, cycle, ok, strings.Join(lines, "\n  ")))
		if !ok {
			c.failed = fmt.Sprintf("cycle %d: not converged %d ticks after the heal:\n  %s", cycle, stableTicks(cfg, c.maxDelay), strings.Join(lines, "\n  "))
			return c, counts
		}
		c.lazyFD = true
		if len(c.violations) > 0 {
			return c, counts
		}
	}
	for _, n := range c.nodes {
		if n.m == nil {
			continue
		}
		s := n.m.Stats()
		counts["leaderships"] += s.Leaderships
		counts["take-overs"] += s.TakeOvers
		counts["hand-overs"] += s.HandOvers
		counts["hand-over timeouts"] += s.HandOverTimeouts
		counts["deposed"] += s.Deposed
		counts["stale"] += s.Stale
		counts["fenced"] += s.Fenced
		counts["drain timeouts"] += s.DrainTimeouts
	}
	return c, counts
}

// chaos makes at most one disruptive change per tick.
func (c *randomRun) chaos(reserve *[]*simNode, counts map[string]uint64) {
	rng := c.rng
	switch r := rng.IntN(1000); {
	case r < 15: // crash a live node, keeping one alive
		if up := c.up(); len(up) > 1 {
			n := up[rng.IntN(len(up))]
			c.logf("%s: crash", n.id)
			c.crash(n)
			counts["crashes"]++
		}
	case r < 35: // restart a crashed node from its persisted epochs
		var down []*simNode
		for _, n := range c.nodes {
			if n.m == nil && n.inc > 0 {
				down = append(down, n)
			}
		}
		if len(down) > 0 {
			n := down[rng.IntN(len(down))]
			c.logf("%s: restart", n.id)
			if err := c.start(n); err != nil {
				c.violate("restart %s: %v", n.id, err)
			}
			counts["restarts"]++
		}
	case r < 45: // a late joiner starts
		if len(*reserve) > 0 {
			n := (*reserve)[0]
			*reserve = (*reserve)[1:]
			c.logf("%s: join", n.id)
			if err := c.start(n); err != nil {
				c.violate("join %s: %v", n.id, err)
			}
			counts["joins"]++
		}
	case r < 60: // partition into two sides at random
		c.side = map[NodeID]int{}
		var b strings.Builder
		for _, n := range c.nodes {
			c.side[n.id] = rng.IntN(2)
			fmt.Fprintf(&b, " %s:%d", n.id, c.side[n.id])
		}
		c.logf("partition%s", b.String())
		counts["partitions"]++
	case r < 70:
		c.logf("heal")
		c.side = map[NodeID]int{}
	case r < 75:
		c.dropRate = []int{0, 50, 200}[rng.IntN(3)]
	case r < 80: // a restart quicker than the failure detectors: no PeerDown
		if up := c.up(); len(up) > 0 {
			n := up[rng.IntN(len(up))]
			c.logf("%s: quick restart", n.id)
			c.crash(n)
			if err := c.start(n); err != nil {
				c.violate("restart %s: %v", n.id, err)
			}
			for _, o := range c.up() { // it knows its peers at once
				if o != n && c.connected(o, n) {
					n.view[o.id] = true
					if err := n.m.PeerUp(o.id, o.prio); err != nil {
						c.violate("%s: peer up: %v", n.id, err)
					}
					c.process(n)
				}
			}
			counts["quick restarts"]++
		}
	}
}

// A seed reproduces its run exactly: same transcript, same counters.
func TestRandomReproducible(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		a, ca := runRandom(seed)
		b, cb := runRandom(seed)
		if a.out.String() != b.out.String() || fmt.Sprint(ca) != fmt.Sprint(cb) {
			t.Errorf("seed %d: two runs differ", seed)
		}
		if a.out.Len() == 0 {
			t.Errorf("seed %d: empty transcript", seed)
		}
	}
}
