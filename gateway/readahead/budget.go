// Package readahead shares one read-ahead budget, in bytes, among the queue
// groups a node runs, so that what the groups hold in memory is bounded by
// configuration rather than by the number of groups or how far they lag.
//
// Each group reports what it holds (its cost: the bytes of its records plus
// a fixed charge per record) and gets a grant: the most it may hold. A group
// at its grant reads nothing more; its records stay in storage and are read
// when acks make room (gateway/queue's SetBudget). The policy:
//
//   - Fair: a group's grant is at most an equal share, total / groups, so a
//     lagging group cannot take what the others need.
//   - Within the total: a group grows only into what is free; one that holds
//     more than its share (the share shrank when groups were added) keeps
//     it, but gets no more, until acks bring it under.
//   - Progress: every group is granted at least the floor, whatever the
//     others hold.
//
// So the groups hold at most total + groups × floor (plus, per partition,
// one record beyond its grant: see gateway/queue). Budget is a pure value:
// no clock, no goroutine, not safe for concurrent use (Shared is).
package readahead

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrInvalid reports a budget that cannot be built.
var ErrInvalid = errors.New("readahead: invalid budget")

// Budget is the node-wide read-ahead budget.
type Budget struct {
	total, floor int64
	used         map[int]int64 // by group ID; bound: the node's groups
	sum          int64
}

// New returns a budget of total bytes that grants each group at least floor.
func New(total, floor int64) (*Budget, error) {
	if total < 1 || floor < 0 || floor > total {
		return nil, fmt.Errorf("%w: total %d, floor %d (want total >= 1, 0 <= floor <= total)", ErrInvalid, total, floor)
	}
	return &Budget{total: total, floor: floor, used: map[int]int64{}}, nil
}

// Join adds group id, holding nothing yet. Joining twice is a no-op.
func (b *Budget) Join(id int) {
	if _, ok := b.used[id]; !ok {
		b.used[id] = 0
	}
}

// Leave removes group id and what it held.
func (b *Budget) Leave(id int) {
	b.sum -= b.used[id]
	delete(b.used, id)
}

// Report records what group id holds now and returns its grant. A group
// not joined is joined.
func (b *Budget) Report(id int, used int64) (grant int64) {
	used = max(used, 0)
	b.sum += used - b.used[id]
	b.used[id] = used
	return b.Grant(id)
}

// Share is the equal share of one group: total / groups, at least the floor.
func (b *Budget) Share() int64 {
	return max(b.total/int64(max(len(b.used), 1)), b.floor)
}

// Grant is the most group id may hold: its share, narrowed to what it holds
// plus what is free, at least the floor.
func (b *Budget) Grant(id int) int64 {
	u := b.used[id]
	free := b.total - b.sum
	return max(min(b.Share(), u+max(free, 0)), b.floor)
}

// Stats is a snapshot of the budget.
type Stats struct {
	Total  int64 // the budget
	Used   int64 // what the groups hold
	Groups int   // groups sharing it
	Share  int64 // one group's equal share
	// Over counts the groups holding more than their share.
	Over int
}

// Stats returns a snapshot.
func (b *Budget) Stats() Stats {
	s := Stats{Total: b.total, Used: b.sum, Groups: len(b.used), Share: b.Share()}
	for _, u := range b.used {
		if u > s.Share {
			s.Over++
		}
	}
	return s
}

// Groups lists the group IDs sharing the budget, in ascending order.
func (b *Budget) Groups() []int {
	ids := make([]int, 0, len(b.used))
	for id := range b.used {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// Shared is a Budget safe for concurrent use by the groups' goroutines.
type Shared struct {
	mu sync.Mutex
	b  *Budget
}

// NewShared returns a concurrency-safe budget (see New).
func NewShared(total, floor int64) (*Shared, error) {
	b, err := New(total, floor)
	if err != nil {
		return nil, err
	}
	return &Shared{b: b}, nil
}

// Join adds group id.
func (s *Shared) Join(id int) {
	s.mu.Lock()
	s.b.Join(id)
	s.mu.Unlock()
}

// Leave removes group id.
func (s *Shared) Leave(id int) {
	s.mu.Lock()
	s.b.Leave(id)
	s.mu.Unlock()
}

// Report records what group id holds and returns its grant.
func (s *Shared) Report(id int, used int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Report(id, used)
}

// Stats returns a snapshot.
func (s *Shared) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Stats()
}
