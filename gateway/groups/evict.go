package groups

import (
	"time"
)

// evictIdle is Config.EvictIdle with its default.
func (r *Registry) evictIdle() time.Duration {
	d := r.cfg.EvictIdle
	if d <= 0 {
		d = time.Minute
	}
	if r.cfg.GroupTTL > 0 {
		d = min(d, r.cfg.GroupTTL)
	}
	return d
}

// idleUndeclaredLocked reports whether g may be removed for want of
// members: undeclared, without members for at least idle, and (in a
// cluster) not led here. Expire and evictIdleLocked share it. Called with
// r.mu.
func (r *Registry) idleUndeclaredLocked(g *group, now time.Time, idle time.Duration) bool {
	if r.clustered() && g.leading {
		return false
	}
	return r.idleLocked(g, now, idle)
}

// idleLocked: undeclared (here and on the peers) and without members
// anywhere for at least idle. Called with r.mu.
func (r *Registry) idleLocked(g *group, now time.Time, idle time.Duration) bool {
	if g.cfg.Declared || len(g.declaredBy) > 0 || g.lastEmpty.IsZero() || g.members() > 0 {
		return false
	}
	return now.Sub(g.lastEmpty) >= idle
}

// evictIdleLocked removes the undeclared group that has been without
// members longest, if at least evictIdle, as Expire would after GroupTTL:
// its runner stops and its offsets go (in the background: the caller holds
// r.mu). It reports whether one was removed. Called with r.mu.
func (r *Registry) evictIdleLocked(now time.Time) bool {
	var victim *group
	for _, g := range r.groups {
		if !r.idleUndeclaredLocked(g, now, r.evictIdle()) {
			continue
		}
		if victim == nil || g.lastEmpty.Before(victim.lastEmpty) {
			victim = g
		}
	}
	if victim == nil {
		return false
	}
	delete(r.groups, victim.cfg.Key)
	victim.leading = false
	run := victim.run
	go func() {
		if run != nil {
			run.halt()
			<-run.done
		}
		r.mu.Lock()
		_, again := r.groups[victim.cfg.Key] // subscribed to anew meanwhile: it has the offsets now
		if !again {
			r.log.Offsets().Remove(victim.consumer)
		}
		r.mu.Unlock()
		if err := r.log.Offsets().Flush(); err != nil {
			r.logger.Error("flush offsets", "err", err)
		}
	}()
	r.counters.removedGroups.Add(1)
	r.logger.Info("queue group removed to make room: max_groups reached and it had no members", "group", victim.cfg.Key.String(),
		"idle", now.Sub(victim.lastEmpty).Round(time.Second).String())
	return true
}
