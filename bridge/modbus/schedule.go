package modbus

import (
	"slices"
	"time"
)

// The polling decisions, pure (times are inputs): which registers of a
// device are due, when its next poll or retry is, and how far apart the
// polls of a failing device are spaced. The bus's I/O loop asks these.

// group is the registers of a device polled at one interval.
type group struct {
	interval time.Duration
	regs     []int
}

// sched is one device's timetable.
type sched struct {
	groups   []group
	next     []time.Time // per group
	failures int         // polls in a row that got no value at all
	retryAt  time.Time   // of the poll in progress; zero when none
}

func newSched(d Device, now time.Time) sched {
	var s sched
	for i, r := range d.Registers {
		g := slices.IndexFunc(s.groups, func(g group) bool { return g.interval == r.Interval })
		if g < 0 {
			s.groups = append(s.groups, group{interval: r.Interval})
			s.next = append(s.next, now)
			g = len(s.groups) - 1
		}
		s.groups[g].regs = append(s.groups[g].regs, i)
	}
	return s
}

// wake is when the device next needs the bus: its retry, or its earliest
// due group.
func (s *sched) wake() time.Time {
	if !s.retryAt.IsZero() {
		return s.retryAt
	}
	w := s.next[0]
	for _, t := range s.next[1:] {
		if t.Before(w) {
			w = t
		}
	}
	return w
}

// due returns the groups due at now and their registers in config order.
func (s *sched) due(now time.Time) (groups []int, regs []int) {
	for g, t := range s.next {
		if !t.After(now) {
			groups = append(groups, g)
			regs = append(regs, s.groups[g].regs...)
		}
	}
	slices.Sort(regs)
	return groups, regs
}

// done schedules the groups of a finished poll: one interval on, skipping
// the ticks a slow bus missed rather than polling to catch up; a device
// that answered nothing backs off, doubling up to maxBackoff (never below
// the interval).
func (s *sched) done(groups []int, now time.Time, answered bool, maxBackoff time.Duration) {
	s.retryAt = time.Time{}
	if answered {
		s.failures = 0
	} else {
		s.failures++
	}
	for _, g := range groups {
		iv := s.groups[g].interval
		next := s.next[g].Add(iv)
		if !next.After(now) {
			next = now.Add(iv)
		}
		if s.failures > 1 {
			next = now.Add(max(iv, failBackoff(iv, s.failures, maxBackoff)))
		}
		s.next[g] = next
	}
}

// failBackoff is the wait after n failed polls in a row: the interval
// doubled n-1 times, capped at hi.
func failBackoff(iv time.Duration, n int, hi time.Duration) time.Duration {
	d := iv
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, max(hi, iv))
}
