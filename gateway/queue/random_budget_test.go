package queue

// The read-ahead budget in the randomized model (TestRandomInterleavings'
// *_budget_* configurations): the group runs under a budget that changes
// during the run (raised, lowered below what it holds, lifted), and every
// check of the model still holds: the budget never changes the order of a
// device's deliveries, loses a record, or stops the group for good; a
// partition holds at most its share of the budget plus one record (or one
// record whatever its size) while the budget has not been lowered.

type budgetModel struct {
	bytes, perRecord int
	// release: the partitions of node 0 drop delivered records' data (ReleaseDelivered).
	release bool
	// loose: partitions that may hold more than their share until they are
	// under it again: the budget went down, or a device waited for a move
	// marker there when it was read (markerWanted).
	loose map[int]bool
}

// setBudget rebuilds the model's (still empty) group under a budget.
func (m *model) setBudget() {
	m.bud = &budgetModel{release: m.rng.IntN(2) == 0}
	m.bud.bytes, m.bud.perRecord = m.randomBudget()
	m.build()
}

// randomBudget picks a budget from below one record per partition to more
// than the windows hold, sometimes none.
func (m *model) randomBudget() (bytes, perRecord int) {
	perRecord = m.rng.IntN(32)
	switch m.rng.IntN(5) {
	case 0:
		return 0, perRecord
	case 1:
		return 1 + m.rng.IntN(len(m.parts)*(maxModelRecord+perRecord)), perRecord // under a record per partition
	default:
		return 1 + m.rng.IntN(len(m.parts)*8*(maxModelRecord+perRecord)), perRecord
	}
}

func (m *model) applyBudget() {
	if m.bud == nil {
		return
	}
	m.g.SetBudget(m.bud.bytes, m.bud.perRecord)
	m.bud.loose = map[int]bool{}
	if m.bud.release {
		m.g.ReleaseDelivered(func(p int) bool { return nodeOf(p) == 0 }, m.bud.perRecord/4)
	}
}

// releasedData reports whether delivery d comes without its data because
// the group released it after an earlier delivery: the runner reads it
// again.
func (m *model) releasedData(d Delivery) bool {
	return m.bud != nil && m.bud.release && nodeOf(d.Msg.Partition) == 0 && d.Deliveries > 1 &&
		d.Msg.Data == nil && d.Msg.Body == nil
}

// changeBudget sets a new budget on the running group.
func (m *model) changeBudget() {
	bytes, per := m.randomBudget()
	old := m.bud.bytes
	lower := bytes != 0 && (old == 0 || bytes/len(m.parts) < old/len(m.parts) || per > m.bud.perRecord)
	m.logf("budget %d B, %d B per record (was %d, %d)", bytes, per, old, m.bud.perRecord)
	m.bud.bytes, m.bud.perRecord = bytes, per
	if lower {
		for _, p := range m.parts {
			m.bud.loose[p] = true
		}
	}
	m.g.SetBudget(bytes, per)
	m.counts["budget changes"]++
}

// noteExempt notes, before partition p's fetch is answered, whether it is
// read past its share because a device waits for a move marker there.
func (m *model) noteExempt(p int) {
	if m.bud == nil {
		return
	}
	if pi, ok := m.g.partIdx[p]; ok && m.g.markerWanted(&m.g.parts[pi]) {
		m.bud.loose[p] = true
		m.counts["reads for a wanted marker"]++
	}
}

// checkBudget checks what each partition holds against its share.
func (m *model) checkBudget(s Stats) {
	if m.bud == nil || m.bud.bytes == 0 {
		return
	}
	share := max(m.bud.bytes/len(m.parts), 1)
	for _, p := range s.Partitions {
		cost := m.g.partCost(&m.g.parts[m.g.partIdx[p.Partition]])
		if p.Held <= 1 || cost <= share {
			delete(m.bud.loose, p.Partition)
		}
		if p.Held > 1 && cost > share+maxModelRecord+m.bud.perRecord && !m.bud.loose[p.Partition] {
			m.fail("p%d holds %d records, %d B of data: cost %d above its budget share %d (budget %d, %d B per record)",
				p.Partition, p.Held, p.Bytes, cost, share, m.bud.bytes, m.bud.perRecord)
		}
		if p.Held > 0 && cost >= share {
			m.counts["partition-steps at the budget"]++
		}
	}
}
