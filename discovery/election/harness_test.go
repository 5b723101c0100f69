package election

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// harness runs script commands against a simulated cluster (sim_test.go).
//
//	cluster a=3 b=2 c=2 groups=g1,g2 [answer= coord= handover= announce= trace=msgs,...]
//	tick [n]                   advance n ticks (default 1), printing what happens
//	status [group...]          every node's view of each group
//	ranks                      each group's nodes, highest rank first
//	check                      does every group have one agreed, highest-ranked leader?
//	crash a | restart a        stop a node (its peers notice at once) / start it again
//	                           from its persisted epochs
//	join d=5                   a new node starts
//	partition a b | c          cut the network (peers notice at once); heal
//	stall a b | unstall a b    hold (then release, in order) messages from a to b
//	hold a | release a         a's drains stay unfinished / finish now
//	drain-delay a=N            a's drains take N ticks (default 2)
//	fence a g1 2:b             a, as partition owner, fences a fetch at 2:b
//	accept a g1 2:b            the pure check
//	persisted a                a's persisted epochs
//	stats a                    a's counters
//	trace msgs persist fd drops fence | trace off
type harness struct {
	c *cluster
}

func newHarness() *harness { return &harness{} }

func (h *harness) run(line string) string {
	fields := strings.Fields(line)
	var pos []string
	args := map[string]string{}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	if h.c != nil {
		h.c.out.Reset()
	}
	var out strings.Builder
	if err := h.exec(fields[0], pos, args, &out); err != nil {
		fmt.Fprintf(&out, "error: %v\n", err)
	}
	if h.c != nil {
		return h.c.out.String() + out.String()
	}
	return out.String()
}

func (h *harness) exec(cmd string, pos []string, args map[string]string, out *strings.Builder) error {
	if h.c == nil && cmd != "cluster" {
		return errors.New("no cluster: start with cluster")
	}
	c := h.c
	switch cmd {
	case "cluster":
		return h.cmdCluster(pos, args)
	case "tick":
		n := 1
		if len(pos) > 0 {
			n = atoi(pos[0])
		}
		for range n {
			c.tick()
		}
	case "status":
		groups := c.groups
		if len(pos) > 0 {
			groups = pos
		}
		for _, g := range groups {
			var b []string
			for _, n := range c.nodes {
				if n.m == nil {
					b = append(b, string(n.id)+" down")
					continue
				}
				st, ok := n.m.Status(g)
				if !ok {
					return fmt.Errorf("unknown group %q", g)
				}
				s := fmt.Sprintf("%s %v", n.id, st.Role)
				switch st.Role {
				case RoleFollower:
					s += " of " + string(st.Leader)
				case RoleTakingOver:
					s += " from " + string(st.Target)
				case RoleHandingOver:
					s += " to " + string(st.Target)
				case RoleCandidate:
					if st.Answered {
						s += " (answered)"
					}
				}
				b = append(b, s+" "+st.Epoch.String())
			}
			fmt.Fprintf(out, "%s: %s\n", g, strings.Join(b, " | "))
		}
	case "ranks":
		for _, g := range c.groups {
			var b []string
			for _, n := range rankOrder(c, g) {
				b = append(b, string(n.id))
			}
			fmt.Fprintf(out, "%s: %s\n", g, strings.Join(b, " > "))
		}
	case "check":
		lines, _ := c.converged()
		for _, l := range lines {
			out.WriteString(l + "\n")
		}
	case "crash":
		n, err := h.node(pos)
		if err != nil {
			return err
		}
		c.crash(n)
		c.syncFD(false)
	case "restart":
		if len(pos) != 1 || c.node(NodeID(pos[0])) == nil {
			return errors.New("want: restart NODE")
		}
		n := c.node(NodeID(pos[0]))
		if n.m != nil {
			return fmt.Errorf("%s is up", n.id)
		}
		if err := c.start(n); err != nil {
			return err
		}
		c.syncFD(false)
	case "join":
		for k, v := range args {
			if c.node(NodeID(k)) != nil {
				return fmt.Errorf("node %s exists", k)
			}
			if err := c.start(c.addNode(NodeID(k), atoi(v))); err != nil {
				return err
			}
		}
		c.syncFD(false)
	case "partition":
		side := 0
		c.side = map[NodeID]int{}
		for _, p := range pos {
			if p == "|" {
				side++
				continue
			}
			if c.node(NodeID(p)) == nil {
				return fmt.Errorf("unknown node %q", p)
			}
			c.side[NodeID(p)] = side
		}
		c.syncFD(false)
	case "heal":
		c.side = map[NodeID]int{}
		c.syncFD(false)
	case "stall", "unstall":
		if len(pos) != 2 {
			return errors.New("want: stall FROM TO")
		}
		c.stalled[[2]NodeID{NodeID(pos[0]), NodeID(pos[1])}] = cmd == "stall"
	case "hold", "release":
		n, err := h.node(pos)
		if err != nil {
			return err
		}
		n.drainHold = cmd == "hold"
		if !n.drainHold { // held drains finish now
			var left []pendingDrain
			for _, d := range c.drains {
				if d.node == n.id && d.inc == n.inc && n.m != nil {
					c.reportDrained(n, d)
				} else {
					left = append(left, d)
				}
			}
			c.drains = left
		}
	case "drain-delay":
		for k, v := range args {
			n := c.node(NodeID(k))
			if n == nil {
				return fmt.Errorf("unknown node %q", k)
			}
			n.drainDelay = atoi(v)
		}
	case "fence", "accept":
		if len(pos) != 3 {
			return fmt.Errorf("want: %s NODE GROUP EPOCH", cmd)
		}
		n, err := h.node(pos[:1])
		if err != nil {
			return err
		}
		e, err := ParseEpoch(pos[2])
		if err != nil {
			return err
		}
		if cmd == "accept" {
			fmt.Fprintf(out, "%v\n", n.m.Accept(pos[1], e))
			return nil
		}
		if c.fence(n, pos[1], e, e.Leader) {
			fmt.Fprintf(out, "served %s %v\n", pos[1], e)
		} else {
			fmt.Fprintf(out, "refused %s %v\n", pos[1], e)
		}
	case "persisted":
		if len(pos) != 1 || c.node(NodeID(pos[0])) == nil {
			return errors.New("want: persisted NODE")
		}
		n := c.node(NodeID(pos[0]))
		var b []string
		for _, g := range c.groups {
			b = append(b, g+"="+n.persisted[g].String())
		}
		fmt.Fprintf(out, "%s\n", strings.Join(b, " "))
	case "stats":
		n, err := h.node(pos)
		if err != nil {
			return err
		}
		s := n.m.Stats()
		fmt.Fprintf(out, "elections %d, leaderships %d, take-overs %d (timed out %d), hand-overs %d, deposed %d, stale %d, fenced %d\n",
			s.Elections, s.Leaderships, s.TakeOvers, s.HandOverTimeouts, s.HandOvers, s.Deposed, s.Stale, s.Fenced)
	case "trace":
		c.trace = map[string]bool{}
		for _, p := range pos {
			if p != "off" {
				c.trace[p] = true
			}
		}
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

func (h *harness) cmdCluster(pos []string, args map[string]string) error {
	cfg := DefaultConfig("x")
	var groups []string
	type member struct {
		id   NodeID
		prio int
	}
	var members []member
	var trace []string
	for k, v := range args {
		switch k {
		case "trace":
			trace = strings.Split(v, ",")
		case "groups":
			groups = strings.Split(v, ",")
		case "answer":
			cfg.AnswerTimeout = atoi(v)
		case "coord":
			cfg.CoordinatorTimeout = atoi(v)
		case "handover":
			cfg.HandOverTimeout = atoi(v)
		case "announce":
			cfg.AnnounceInterval = atoi(v)
		default:
			members = append(members, member{NodeID(k), atoi(v)})
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	h.c = newCluster(cfg, groups, nil)
	for _, t := range trace {
		h.c.trace[t] = true
	}
	for _, m := range members {
		h.c.addNode(m.id, m.prio)
	}
	for _, n := range h.c.nodes {
		if err := h.c.start(n); err != nil {
			return err
		}
	}
	h.c.syncFD(false)
	return nil
}

func (h *harness) node(pos []string) (*simNode, error) {
	if len(pos) < 1 {
		return nil, errors.New("want a node")
	}
	n := h.c.node(NodeID(pos[0]))
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", pos[0])
	}
	if n.m == nil {
		return nil, fmt.Errorf("node %s is down", n.id)
	}
	return n, nil
}

// rankOrder returns every node (up or down) in group's rank order, highest first.
func rankOrder(c *cluster, group string) []*simNode {
	nodes := append([]*simNode(nil), c.nodes...)
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			if RankOf(nodes[j].id, nodes[j].prio, group).Above(RankOf(nodes[i].id, nodes[i].prio, group)) {
				nodes[i], nodes[j] = nodes[j], nodes[i]
			}
		}
	}
	return nodes
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("script: bad number %q", s)) // a broken script, not bad input to the code under test
	}
	return n
}
