package queue

// pushReady makes entry ei dispatchable: onto the ready queue (random) or
// its device's member queue (sticky). front puts it first, for messages
// that return from a member that left.
func (g *Group) pushReady(ei int32, front bool) {
	g.entries[ei].state = stReady
	if g.cfg.Strategy != StrategySticky {
		g.enqueue(&g.ready, ei, front)
		return
	}
	slot := g.stickyMember(g.entries[ei].dev)
	if slot == noEntry {
		g.enqueue(&g.unassigned, ei, front)
		return
	}
	g.enqueue(&g.members.slots[slot].queue, ei, front)
	g.addWork(slot)
}

func (g *Group) enqueue(q *entryQueue, ei int32, front bool) {
	if front {
		g.qPushFront(q, ei)
	} else {
		g.qPush(q, ei)
	}
}

// dispatch delivers as many ready messages as credit allows. While
// draining only what is below the marks goes (drain.go).
func (g *Group) dispatch() {
	if g.drained || (g.draining && !g.drainDelivers()) {
		return
	}
	for g.redeliver.n > 0 {
		if g.parts[g.entries[g.redeliver.head].part].paused {
			g.park(g.qPop(&g.redeliver))
			continue
		}
		slot, ok := g.pickAvoiding(g.entries[g.redeliver.head].avoid)
		if !ok {
			// The head waits for a member other than the one that let it
			// expire; the redeliveries behind it wait too (they are rare),
			// fresh messages still go.
			break
		}
		g.deliver(g.qPop(&g.redeliver), slot)
	}
	if g.cfg.Strategy == StrategySticky {
		g.dispatchSticky()
		return
	}
	for g.ready.n > 0 && len(g.members.withCredit) > 0 {
		ei := g.qPop(&g.ready)
		if g.park(ei) || g.withhold(ei) {
			continue
		}
		wc := g.members.withCredit
		g.deliver(ei, wc[randIntN(g.rng, len(wc))])
	}
	if g.window > 1 {
		g.dispatchSticky() // the member queues hold the runs' next records
	}
}

// park moves a dispatchable entry of a paused partition, just taken off its
// queue, to the parked queue and reports whether it did.
func (g *Group) park(ei int32) bool {
	if !g.parts[g.entries[ei].part].paused {
		return false
	}
	if g.entries[ei].follow {
		g.pullBackFollow(ei)
		return true
	}
	g.qPush(&g.parked, ei)
	return true
}

func (g *Group) dispatchSticky() {
	for len(g.work) > 0 {
		slot := g.work[len(g.work)-1]
		g.work = g.work[:len(g.work)-1]
		m := &g.members.slots[slot]
		m.inWork = false
		for m.live && m.queue.n > 0 && m.inFlight < m.credit {
			if ei := g.qPop(&m.queue); !g.park(ei) && !g.withhold(ei) {
				g.deliver(ei, slot)
			}
			m = &g.members.slots[slot]
		}
	}
}

// deliver hands entry ei to the member in slot and emits the Delivery.
func (g *Group) deliver(ei, slot int32) {
	e := &g.entries[ei]
	m := &g.members.slots[slot]
	e.state = stInFlight
	e.member = slot
	e.avoid = noMember
	e.deliveries++
	e.deadline = g.now + int64(g.cfg.AckWait)
	g.heapPush(ei)
	m.inFlight++
	g.inFlight++
	p := &g.parts[e.part]
	p.highDelivered = max(p.highDelivered, e.msg.Offset)
	g.updateCreditList(slot)
	g.counters.delivered++
	if e.deliveries > 1 {
		g.counters.redeliveries++
	}
	out := &g.out[g.cur]
	out.Deliver = append(out.Deliver, Delivery{Member: m.id, Msg: e.msg, Deliveries: int(e.deliveries)})
	g.releaseData(ei)
	if g.window > 1 {
		g.runDelivered(ei, slot)
	}
}
