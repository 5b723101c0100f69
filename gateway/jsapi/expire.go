package jsapi

import (
	"context"
	"sync"
	"time"
)

// Consumers with an inactive_threshold (every ephemeral one: 5 s unless
// set) are removed, queue group and all, once nothing has used them for
// that long. Use is what the front end reports with Touch: a pull request
// outstanding, a push consumer's deliver subject listened to, or messages
// of the consumer still unacknowledged.

// Expires reports whether c ends when inactive (the front end need only
// Touch those).
func (c *Consumer) Expires() bool { return c.Config.InactiveThreshold > 0 }

// Touch records that c is in use at now.
func (s *Service) Touch(c *Consumer, now time.Time) {
	if !c.Expires() {
		return
	}
	s.mu.Lock()
	if now.After(c.active) {
		c.active = now
	}
	s.mu.Unlock()
}

// Expire removes the consumers inactive for their inactive_threshold at
// now and returns their names. A consumer whose group other subscribers
// share stays (and counts as active).
func (s *Service) Expire(now time.Time) []string {
	var gone []*Consumer
	s.mu.Lock()
	for name, c := range s.consumers {
		if !c.Expires() || now.Sub(c.active) < c.Config.InactiveThreshold {
			continue
		}
		if e := s.removeGroupLocked(c); e != nil {
			s.logger.Warn("inactive consumer kept", "consumer", name, "err", e.Description)
			c.active = now
			continue
		}
		delete(s.consumers, name)
		gone = append(gone, c)
	}
	var err error
	if len(gone) > 0 {
		err = s.saveLocked()
	}
	// Counted before the lock goes: whoever sees a consumer gone sees it
	// counted (a test read 0 between the two).
	s.Expired.Add(uint64(len(gone)))
	s.mu.Unlock()
	names := make([]string, 0, len(gone))
	for _, c := range gone {
		names = append(names, c.Name)
		s.logger.Info("inactive consumer removed", "consumer", c.Name, "ephemeral", c.Ephemeral, "inactive_threshold", c.Config.InactiveThreshold)
		if s.hooks.Deleted != nil {
			s.hooks.Deleted(c)
		}
	}
	if err != nil {
		s.logger.Error("write consumer file", "err", err)
	}
	return names
}

// expireEvery is how often Run looks for inactive consumers.
const expireEvery = 250 * time.Millisecond

// Run removes inactive consumers until ctx ends.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.last.Run(ctx) })
	for p := range s.log.NumPartitions() {
		wg.Go(func() { s.wakeOrdered(ctx, p) })
	}
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Expire(now)
			s.expireOrdered(now)
		}
	}
}
