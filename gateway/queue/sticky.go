package queue

// stickyMember returns the member a device sticks to: the highest
// rendezvous score over the members with credit > 0, so a membership change
// moves only the devices of the members that came or went. The choice is
// cached per device until the membership epoch changes.
func (g *Group) stickyMember(di int32) int32 {
	d := &g.devices[di]
	mt := &g.members
	if d.stickyEpoch == mt.epoch {
		return d.sticky
	}
	best := noEntry
	var bestScore uint64
	for slot := range mt.slots {
		m := &mt.slots[slot]
		if !m.live || m.credit == 0 {
			continue
		}
		score := mix64(d.hash ^ m.hash)
		if best == noEntry || score > bestScore || (score == bestScore && m.id < mt.slots[best].id) {
			best, bestScore = int32(slot), score
		}
	}
	d.stickyEpoch, d.sticky = mt.epoch, best
	return best
}

// membershipChanged is called when the set of members with credit > 0
// changes. With the sticky strategy the waiting messages are reassigned,
// each device's messages keeping their relative order.
func (g *Group) membershipChanged() {
	g.members.epoch++
	if g.cfg.Strategy != StrategySticky && g.window == 1 {
		return
	}
	all := newEntryQueue()
	for slot := range g.members.slots {
		q := &g.members.slots[slot].queue
		for q.n > 0 {
			g.qPush(&all, g.qPop(q))
		}
	}
	for g.unassigned.n > 0 {
		g.qPush(&all, g.qPop(&g.unassigned))
	}
	restarts := g.restarts[:0]
	for all.n > 0 {
		ei := g.qPop(&all)
		if !g.entries[ei].follow {
			g.pushReady(ei, false)
			continue
		}
		if di, ended := g.requeueFollow(ei); ended {
			restarts = append(restarts, di)
		}
	}
	for _, di := range restarts {
		g.schedule(di)
	}
	g.restarts = restarts[:0]
}

// addWork lists a member whose sticky queue it may now serve.
func (g *Group) addWork(slot int32) {
	if g.cfg.Strategy != StrategySticky && g.window == 1 {
		return
	}
	m := &g.members.slots[slot]
	if m.inWork || !m.live || m.queue.n == 0 || m.inFlight >= m.credit {
		return
	}
	m.inWork = true
	g.work = append(g.work, slot)
}
