package queue

// The read-ahead budget (SetBudget): a cap, in bytes, on what the group
// holds of read-ahead, on top of the per-partition windows of the Config.
//
// A node shares one budget among its groups (gateway/readahead decides each
// group's grant); the group splits its grant evenly among its partitions.
// A held record costs len(Data) plus a fixed per-record charge (the entry,
// the decoded record: what the runner keeps beside Data). A partition at its
// share is not read further; the records beyond stay in storage and are read
// when acks make room, so the budget never changes which record goes out
// next, only how far ahead the group has read. A partition holding nothing
// always takes one record, so every partition makes progress whatever the
// grant. The per-device share of a window shrinks with the budget (an
// eighth of a partition's share), so one device's backlog still cannot fill
// a partition.

// SetBudget caps what the group holds: records cost len(Data)+perRecord
// bytes each (a released one, see ReleaseDelivered, its charge only), and
// the group holds at most bytes of them (split evenly among its
// partitions; each partition holds at least one record when there is one
// to read). bytes <= 0 lifts the cap. A group above a lowered cap keeps
// what it holds and reads nothing more until it is below.
func (g *Group) SetBudget(bytes, perRecord int) {
	g.budget, g.perRecord = max(bytes, 0), max(perRecord, 0)
	g.updateShares()
}

// Usage reports what the group holds: unfinished records and len(Data) of them.
func (g *Group) Usage() (records, bytes int) {
	for i := range g.parts {
		bytes += g.parts[i].bytes
	}
	return g.held, bytes
}

// Cost is what the group holds in budget bytes: its records' Data, plus
// perRecord for each record, perReleased for each released one.
func (g *Group) Cost(perRecord, perReleased int) int {
	c := 0
	for i := range g.parts {
		c += g.parts[i].cost(perRecord, perReleased)
	}
	return c
}

// cost is what p holds: its bytes plus each held record's cost, a released
// one's smaller.
func (p *partition) cost(perRecord, perReleased int) int {
	return p.bytes + (p.held-p.released)*perRecord + p.released*perReleased
}

// partShare is one partition's share of the budget, 0 when there is none.
func (g *Group) partShare() int {
	if g.budget == 0 {
		return 0
	}
	return max(g.budget/max(len(g.parts), 1), 1)
}

func (g *Group) partCost(p *partition) int {
	return p.cost(g.perRecord, g.releasedCost)
}

// overBudget reports whether partition p is at its budget share: it takes
// no further record. A partition holding nothing is never at it, nor is one
// where a device waits for its move marker (markerWanted).
func (g *Group) overBudget(p *partition) bool {
	s := g.partShare()
	return s > 0 && p.held > 0 && g.partCost(p) >= s && !g.markerWanted(p)
}

// budgetFits reports whether partition p may take one more record of n
// bytes of Data under the budget.
func (g *Group) budgetFits(p *partition, n int) bool {
	s := g.partShare()
	return s == 0 || p.held == 0 || g.partCost(p)+n+g.perRecord <= s || g.markerWanted(p)
}

// markerWanted reports whether a device waits for a move marker in
// partition p (its lane head elsewhere names it). Such a partition is read
// within its window whatever the budget: otherwise two partitions at their
// shares, each holding a record that waits for a marker not yet read in the
// other, would wait for each other for ever. Devices move rarely, so this
// costs the budget little. The gated list may name devices freed since: at
// worst p is read a little further.
func (g *Group) markerWanted(p *partition) bool {
	for _, di := range g.gated {
		d := &g.devices[di]
		if d.pending == 0 {
			continue
		}
		for _, ln := range d.lanes {
			e := &g.entries[ln.head]
			if e.msg.Kind == KindData && !e.msg.MoveRef.IsZero() && e.msg.MoveRef.Partition == p.id && e.msg.Partition != p.id {
				return true
			}
		}
	}
	return false
}

// full reports whether partition p holds all it may (window or budget).
func (g *Group) full(p *partition) bool {
	return p.held >= g.cfg.ReadAheadMsgs || p.bytes >= g.cfg.ReadAheadBytes || g.overBudget(p)
}

// fetchLimits bounds a Fetch of partition p: the window's room, narrowed to
// the budget's.
func (g *Group) fetchLimits(p *partition, msgs, bytes int) (int, int) {
	s := g.partShare()
	if s == 0 {
		return msgs, bytes
	}
	room := s - g.partCost(p)
	if p.held == 0 {
		room = max(room, 1)
	}
	room = max(room, 1)
	return max(min(msgs, room/max(g.perRecord, 1)), 1), max(min(bytes, room), 1)
}

// updateShares sets the per-device share of a window: the Config's,
// narrowed to an eighth of a partition's budget share.
func (g *Group) updateShares() {
	g.shareMsgs, g.shareBytes = g.cfg.deviceShare()
	s := g.partShare()
	if s == 0 {
		return
	}
	g.shareMsgs = min(g.shareMsgs, max(s/max(g.perRecord, 1)/8, 1))
	g.shareBytes = min(g.shareBytes, max(s/8, 1))
}

// ReleaseDelivered makes the group drop the Data and Body of a record once
// it is delivered, in the partitions release selects (nil: none): a record
// in flight then costs the group only its entry, not its bytes. A later
// Delivery or DeadLetter of such a record carries Data and Body nil (its
// Device, Seq and the other routing fields are kept): the runner reads it
// again from storage, which still has it (the commit stays below it). For
// partitions the runner can read at once (local ones).
// A released record costs the budget perReleased (what its entry takes).
func (g *Group) ReleaseDelivered(release func(partition int) bool, perReleased int) {
	g.release, g.releasedCost = release, max(perReleased, 0)
}

// releaseData drops the data of entry ei, just delivered, when its
// partition releases delivered records.
func (g *Group) releaseData(ei int32) {
	e := &g.entries[ei]
	if g.release == nil || e.released || !g.release(e.msg.Partition) {
		return
	}
	n := len(e.msg.Data)
	g.parts[e.part].bytes -= n
	if g.cfg.Ordering == OrderPerDevice {
		for i := range g.devices[e.dev].lanes {
			if ln := &g.devices[e.dev].lanes[i]; ln.part == e.part {
				ln.bytes -= n
				break
			}
		}
	}
	e.msg.Data, e.msg.Body = nil, nil
	e.released = true
	g.parts[e.part].released++
	e.msg.Device = g.devices[e.dev].id // not the read buffer's copy
}
