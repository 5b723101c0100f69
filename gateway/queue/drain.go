package queue

import (
	"fmt"
	"time"
)

// Drain starts the hand-over: the group stops reading and stops
// delivering (messages that return — naks, expiries, members leaving — stay
// for the next owner), and waits for in-flight deliveries to be
// acknowledged until deadline. When none is left, or at the deadline
// (observed by Tick or any later input), the next Ready carries the final
// Commit actions and Drained; then the group takes no more input. Calling
// Drain again moves the deadline.
func (g *Group) Drain(deadline, now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: drain: %w", ErrDrained)
	}
	g.setNow(now)
	g.draining = true
	g.drainDeadline = deadline.UnixNano()
	g.checkDrain()
	return nil
}

// Draining reports whether Drain was called; Drained whether it completed.
func (g *Group) Draining() bool { return g.draining }

// Drained reports whether the hand-over completed.
func (g *Group) Drained() bool { return g.drained }

func (g *Group) checkDrain() {
	if !g.draining || g.drained {
		return
	}
	if g.inFlight == 0 || g.now >= g.drainDeadline {
		g.drained = true
		g.drainedPending = true
	}
}
