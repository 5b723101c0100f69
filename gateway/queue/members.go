package queue

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// MemberID names a member (a subscription of a worker) within the group.
type MemberID string

type member struct {
	id        MemberID
	hash      uint64
	gen       uint32 // bumped when the slot is freed, so stale memberRefs are recognisable
	live      bool
	credit    int
	inFlight  int
	creditPos int32      // index in memberTable.withCredit, or -1
	queue     entryQueue // sticky strategy: messages waiting for this member
	pauses    uint32     // times its credit went to 0: a run it holds stops (devwindow.go)
	inWork    bool       // listed in Group.work
}

// memberRef names a member slot at one generation.
type memberRef struct {
	slot int32
	gen  uint32
}

var noMember = memberRef{slot: noEntry}

type memberTable struct {
	slots []member
	free  []int32
	byID  map[MemberID]int32 // bound: Config.MaxMembers
	// withCredit lists the live members with in-flight < credit, for O(1) random choice.
	withCredit []int32
	active     int    // live members with credit > 0
	epoch      uint64 // bumped whenever the set of members with credit > 0 changes
}

func newMemberTable() memberTable {
	return memberTable{byID: make(map[MemberID]int32), epoch: 1}
}

func (g *Group) refOf(slot int32) memberRef {
	return memberRef{slot: slot, gen: g.members.slots[slot].gen}
}

// resolve returns the slot of r if that member is still there.
func (g *Group) resolve(r memberRef) (int32, bool) {
	if r.slot < 0 || int(r.slot) >= len(g.members.slots) {
		return noEntry, false
	}
	m := &g.members.slots[r.slot]
	return r.slot, m.live && m.gen == r.gen
}

// AddMember adds a member with the given credit (maximum messages in
// flight; DefaultCredit means Config.MaxInFlight; 0 joins paused).
func (g *Group) AddMember(id MemberID, credit int, now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: add member %q: %w", id, ErrDrained)
	}
	if credit == DefaultCredit {
		credit = g.cfg.MaxInFlight
	}
	if credit < 0 {
		return fmt.Errorf("queue: add member %q: %w, got %d", id, ErrBadCredit, credit)
	}
	mt := &g.members
	if _, ok := mt.byID[id]; ok {
		return fmt.Errorf("queue: add member %q: %w", id, ErrMemberExists)
	}
	if len(mt.byID) >= g.cfg.MaxMembers {
		return fmt.Errorf("queue: add member %q: %w (max %d)", id, ErrTooManyMembers, g.cfg.MaxMembers)
	}
	g.setNow(now)
	var slot int32
	if n := len(mt.free); n > 0 {
		slot = mt.free[n-1]
		mt.free = mt.free[:n-1]
	} else {
		mt.slots = append(mt.slots, member{})
		slot = int32(len(mt.slots) - 1)
	}
	m := &mt.slots[slot]
	*m = member{id: id, hash: hashString(string(id)), gen: m.gen, live: true, creditPos: -1, queue: newEntryQueue()}
	mt.byID[id] = slot
	g.setCredit(slot, credit)
	g.dispatch()
	return nil
}

// SetCredit changes a member's credit at any time. Lowering it below the
// member's in-flight count recalls nothing: the member gets no new message
// until its in-flight count is below the new credit. 0 pauses the member.
func (g *Group) SetCredit(id MemberID, credit int, now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: set credit of %q: %w", id, ErrDrained)
	}
	if credit < 0 {
		return fmt.Errorf("queue: set credit of %q: %w, got %d", id, ErrBadCredit, credit)
	}
	slot, ok := g.members.byID[id]
	if !ok {
		return fmt.Errorf("queue: set credit of %q: %w", id, ErrUnknownMember)
	}
	g.setNow(now)
	g.setCredit(slot, credit)
	g.dispatch()
	return nil
}

func (g *Group) setCredit(slot int32, credit int) {
	mt := &g.members
	m := &mt.slots[slot]
	wasActive := m.credit > 0
	m.credit = credit
	g.updateCreditList(slot)
	if wasActive != (credit > 0) {
		if credit > 0 {
			mt.active++
		} else {
			mt.active--
			m.pauses++
		}
		g.membershipChanged()
	}
	g.addWork(slot)
}

// RemoveMember removes a member that left or failed. Its in-flight messages
// go back to the head of their device queues (OrderNone: to the front of the
// ready queue, in offset order) and are redelivered; each counts as a failed
// delivery for Config.MaxDeliver.
func (g *Group) RemoveMember(id MemberID, now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: remove member %q: %w", id, ErrDrained)
	}
	mt := &g.members
	slot, ok := mt.byID[id]
	if !ok {
		return fmt.Errorf("queue: remove member %q: %w", id, ErrUnknownMember)
	}
	g.setNow(now)

	// The timer heap holds every in-flight entry: a leave is rare, a scan is cheap.
	held := g.scratch[:0]
	for _, ei := range g.timers {
		if e := &g.entries[ei]; e.state == stInFlight && e.member == slot {
			held = append(held, ei)
		}
	}
	slices.SortFunc(held, func(a, b int32) int {
		ea, eb := &g.entries[a], &g.entries[b]
		return cmp.Or(cmp.Compare(ea.part, eb.part), cmp.Compare(ea.msg.Offset, eb.msg.Offset))
	})

	m := &mt.slots[slot]
	m.live = false
	m.inFlight = 0
	g.updateCreditList(slot)
	delete(mt.byID, id)
	if m.credit > 0 {
		mt.active--
	}
	m.credit = 0
	m.gen++
	mt.free = append(mt.free, slot)
	g.membershipChanged() // also moves the member's sticky queue to the remaining members

	// Back to the front in reverse, so the queue front is in offset order.
	for i := len(held) - 1; i >= 0; i-- {
		ei := held[i]
		g.heapRemove(ei)
		g.inFlight--
		g.counters.memberLeaveRequeues++
		g.failDelivery(ei, true)
	}
	g.scratch = held[:0]
	g.checkDrain()
	g.dispatch()
	return nil
}

// updateCreditList keeps withCredit in step with a member's counters.
func (g *Group) updateCreditList(slot int32) {
	mt := &g.members
	m := &mt.slots[slot]
	want := m.live && m.inFlight < m.credit
	switch {
	case want && m.creditPos < 0:
		m.creditPos = int32(len(mt.withCredit))
		mt.withCredit = append(mt.withCredit, slot)
	case !want && m.creditPos >= 0:
		last := mt.withCredit[len(mt.withCredit)-1]
		mt.withCredit[m.creditPos] = last
		mt.slots[last].creditPos = m.creditPos
		mt.withCredit = mt.withCredit[:len(mt.withCredit)-1]
		m.creditPos = -1
	}
}

// releaseCredit returns the credit of one delivery to its member.
func (g *Group) releaseCredit(slot int32) {
	g.inFlight--
	m := &g.members.slots[slot]
	m.inFlight--
	g.updateCreditList(slot)
	g.addWork(slot)
}

// pickAvoiding chooses a member with free credit for a redelivery after an
// ack_wait expiry, other than the member that let it expire where another
// member exists. If the only member with free credit is the avoided one
// while another member with credit > 0 exists, it returns false: the
// message waits for that other member.
func (g *Group) pickAvoiding(avoid memberRef) (int32, bool) {
	wc := g.members.withCredit
	if len(wc) == 0 {
		return noEntry, false
	}
	slot, ok := g.resolve(avoid)
	if !ok || g.members.slots[slot].creditPos < 0 {
		return wc[randIntN(g.rng, len(wc))], true
	}
	if len(wc) == 1 {
		if g.members.active > 1 {
			return noEntry, false
		}
		return slot, true
	}
	pos := int(g.members.slots[slot].creditPos)
	i := randIntN(g.rng, len(wc)-1)
	if i >= pos {
		i++
	}
	return wc[i], true
}
