package groups

import (
	"errors"
	"fmt"
)

// Errors of Remove.
var (
	// ErrGroupShared: the group has members Remove was not allowed to drop.
	ErrGroupShared = errors.New("groups: queue group has other members")
	// ErrRemoveClustered: groups of a cluster are not removed by Remove
	// (other nodes lead and know them); the cluster deletes them everywhere
	// with Forget.
	ErrRemoveClustered = errors.New("groups: queue groups of a cluster cannot be removed on demand")
)

// Remove deletes the group of key on a standalone node: its runner stops,
// its committed offsets are dropped (they no longer hold back retention),
// and it is gone from Stats. Every local member must be one that owned
// reports true for (the caller's own, which it then forgets); otherwise
// nothing changes and the error wraps ErrGroupShared. Acknowledgements of
// its deliveries that come later are stale. A later Join or Declare of the
// same key starts a new group.
func (r *Registry) Remove(key GroupKey, owned func(Member) bool) error {
	if r.clustered() {
		return ErrRemoveClustered
	}
	return r.remove(key, owned)
}

// Forget is Remove for one node of a cluster, which deletes the group on
// every node (the election forgets it first, so nothing leads it again): it
// drops the group here, its runner if this node leads it, and the offsets
// of this node's partitions. It is refused (ErrGroupShared) while the group
// has members on this node. The caller has checked the other nodes'.
func (r *Registry) Forget(key GroupKey) error {
	return r.remove(key, nil)
}

func (r *Registry) remove(key GroupKey, owned func(Member) bool) error {
	r.mu.Lock()
	g := r.groups[key]
	if g == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownGroup, key)
	}
	for id, lm := range g.local {
		if owned == nil || !owned(lm.m) {
			n := len(g.local)
			r.mu.Unlock()
			return fmt.Errorf("%w: %s has %d members, %s among them", ErrGroupShared, key, n, id)
		}
	}
	delete(r.groups, key)
	for id := range g.local {
		delete(r.members, id)
	}
	g.leading = false
	run := g.run
	expired := r.expiring[key]
	r.mu.Unlock()
	if run != nil {
		run.halt()
		<-run.done
	}
	r.mu.Lock()
	_, again := r.groups[key] // joined anew meanwhile: the offsets are the new group's
	if !again {
		r.log.Offsets().Remove(g.consumer)
	}
	r.mu.Unlock()
	if err := r.log.Offsets().Flush(); err != nil {
		return fmt.Errorf("groups: remove %s: flush offsets: %w", key, err)
	}
	if expired {
		r.counters.removedGroups.Add(1)
	} else {
		r.counters.deletedGroups.Add(1)
	}
	r.logger.Info("queue group removed", "group", key.String())
	return nil
}
