package groups

import (
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/queue"
)

// maxHeldForwards bounds the forwarded deliveries tracked as held by this
// node's members; beyond it they are delivered untracked (counted), and a
// stop does not wait for them.
const maxHeldForwards = 65536

// forwardSettle: a stopping node waits at least this long after it told
// the leaders its members take nothing more (and after the latest forward
// that arrived), so deliveries the leaders sent before they heard it are
// held and answered too.
const forwardSettle = 250 * time.Millisecond

// heldForwards tracks the deliveries other nodes' leaders forwarded to this
// node's members and the members have not answered yet (acked, nak'ed,
// terminated, or the member left), so that a node that stops can wait for
// the answers before it closes its members' connections: an answer lost with
// a connection makes the leader deliver the message again.
type heldForwards struct {
	mu        sync.Mutex
	held      map[AckHandle]struct{} // bound: maxHeldForwards
	untracked atomic.Uint64
	lastIn    atomic.Int64 // unix ns of the latest forward delivered
}

// add notes a delivery about to be handed to a member.
func (h *heldForwards) add(a AckHandle) {
	h.lastIn.Store(time.Now().UnixNano())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[AckHandle]struct{}{}
	}
	if len(h.held) >= maxHeldForwards {
		h.untracked.Add(1)
		return
	}
	h.held[a] = struct{}{}
}

// answered forgets a delivery its member answered (or could not take).
func (h *heldForwards) answered(a AckHandle) {
	h.mu.Lock()
	if len(h.held) > 0 {
		delete(h.held, a)
	}
	h.mu.Unlock()
}

// left forgets every delivery member held.
func (h *heldForwards) left(member queue.MemberID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for a := range h.held {
		if a.Member == member {
			delete(h.held, a)
		}
	}
}

func (h *heldForwards) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// Quiesce prepares a stop of this node (cluster mode): every group's
// members of this node are reported to the other nodes with credit 0, so
// the leaders forward them nothing more; what they hold stays with them to
// be answered (see WaitForwards). Groups this node leads are handed over by
// Drain.
func (r *Registry) Quiesce() {
	if !r.clustered() {
		return
	}
	r.mu.Lock()
	r.quiescing = true
	r.quiescedAt = time.Now()
	var keys []GroupKey
	for key, g := range r.groups {
		if len(g.local) > 0 {
			keys = append(keys, key)
		}
	}
	r.mu.Unlock()
	for _, key := range keys {
		r.cfg.Peers.MembersChanged(key)
	}
}

// WaitForwards waits, until deadline, for this node's members to answer
// every delivery other nodes' leaders forwarded to them, and for
// forwardSettle to pass since Quiesce and since the latest forward. It
// reports whether none was left. Call it after Quiesce, before closing the
// members' connections.
func (r *Registry) WaitForwards(deadline time.Time) bool {
	if !r.clustered() {
		return true
	}
	r.mu.Lock()
	since := r.quiescedAt
	r.mu.Unlock()
	for {
		now := time.Now()
		quiet := since
		if in := time.Unix(0, r.held.lastIn.Load()); in.After(quiet) {
			quiet = in
		}
		if r.held.count() == 0 && now.Sub(quiet) >= forwardSettle {
			return true
		}
		if !now.Before(deadline) {
			return r.held.count() == 0
		}
		time.Sleep(min(10*time.Millisecond, deadline.Sub(now)))
	}
}
