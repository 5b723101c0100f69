package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"edgeq/gateway/groups"
)

// Deleting a queue group in a cluster: every node knows the group (its
// members, its offsets in the node's partitions, its election), so the node
// where the delete is asked forgets it and tells every peer (REMOVED), and
// each peer forgets it too: the election first (a leader steps down, so
// nothing leads it again), then the registry (runner, this node's offsets).
// A tombstone then refuses, for tombstoneFor, what a deposed leader still
// asks of the group (fetches, commits, positions would bring it back) and
// ignores member lists without members that were on their way.

// ErrPeerDown: a delete is refused while a peer is unreachable, which would
// bring the group back (with its offsets) when it returns.
var ErrPeerDown = errors.New("cluster: a peer is unreachable")

// tombstoneFor is how long a deleted group's requests are refused.
const tombstoneFor = time.Minute

// maxTombstones bounds the tombstones (the oldest goes first).
const maxTombstones = 256

// tombstones are groups deleted lately.
type tombstones struct {
	mu sync.Mutex
	at map[string]time.Time // group name -> deleted; bound: maxTombstones
}

func (t *tombstones) add(name string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]time.Time{}
	}
	for n, at := range t.at {
		if now.Sub(at) >= tombstoneFor {
			delete(t.at, n)
		}
	}
	if len(t.at) >= maxTombstones {
		oldest := ""
		for n, at := range t.at {
			if oldest == "" || at.Before(t.at[oldest]) {
				oldest = n
			}
		}
		delete(t.at, oldest)
	}
	t.at[name] = now
}

// has reports whether name was deleted within tombstoneFor.
func (t *tombstones) has(name string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[name]
	return ok && now.Sub(at) < tombstoneFor
}

// clear drops name's tombstone: the group is made anew (a member joined).
func (t *tombstones) clear(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.at, name)
}

// RemoveGroup deletes group key on every node: here, then on each peer
// (REMOVED). It is refused while a peer the cluster knows is unreachable.
// The caller has checked that the group has no members on any node; a
// member that joins on another node meanwhile keeps the group there.
func (c *Node) RemoveGroup(key groups.GroupKey) error {
	cs := Stats{Peers: c.mgr.Peers(), Unreachable: c.mgr.Unreachable()}
	if down := cs.DownPeers(); len(down) > 0 {
		return fmt.Errorf("%w: %s would bring %s back when it returns: delete it once every node is up", ErrPeerDown,
			strings.Join(down, ", "), key)
	}
	c.gmu.Lock()
	c.waiting = slices.DeleteFunc(c.waiting, func(g string) bool { return g == key.String() })
	c.gmu.Unlock()
	if err := c.link.forget(key); err != nil {
		return err
	}
	body := AppendRemoved(nil, wireGroup(key))
	for _, ps := range cs.Peers {
		if err := c.mgr.Send(ps.Node, TypeRemoved, body); err != nil {
			c.logger.Warn("group deleted here, not told to a peer", "group", key.String(), "peer", ps.Node, "err", err)
		}
	}
	return nil
}

// forget drops key here: tombstone, election, registry.
func (p *peerLink) forget(key groups.GroupKey) error {
	name := key.String()
	p.removed.add(name, time.Now())
	if err := p.elector.RemoveGroup(name); err != nil {
		return fmt.Errorf("cluster: delete %s: election: %w", key, err)
	}
	err := p.reg.Forget(key)
	if errors.Is(err, groups.ErrUnknownGroup) {
		return nil
	}
	return err
}

// serveRemoved handles a peer's REMOVED.
func (p *peerLink) serveRemoved(node string, g GroupName) {
	key := keyOf(g)
	go func() { // a runner's stop waits: not on the connection's reader
		if err := p.forget(key); err != nil {
			p.logger.Warn("queue group deleted on a peer, kept here", "peer", node, "group", key.String(), "err", err)
			return
		}
		p.logger.Info("queue group deleted on a peer: forgotten here", "peer", node, "group", key.String())
	}()
}
