// Package backoff is the wait between retries that edgeq's reconnect and
// reopen loops share: exponential, capped, with "equal jitter" so that a
// fleet of gateways (or the ports on one USB hub) that failed together do
// not retry in lockstep. Delay is pure (the random number is an input), so
// loops are tested with a fixed one.
package backoff

import "time"

// Policy is attempt n's wait: min(Max, Min·2ⁿ), of which half is fixed and
// half scaled by a random number in [0, 1).
type Policy struct {
	Min, Max time.Duration
}

// Delay returns the wait before attempt n (0-based; 0 again after a success
// that counts as one). rnd is uniform in [0, 1) (rand.Float64); it is
// clamped to [0, 1]. A Min of 0 or an overflow waits as for the cap.
func (p Policy) Delay(attempt int, rnd float64) time.Duration {
	d := p.Min
	for i := 0; i < attempt && d > 0 && d < p.Max; i++ {
		d *= 2
	}
	if d > p.Max || d <= 0 {
		d = p.Max
	}
	half := d / 2
	rnd = min(max(rnd, 0), 1)
	return half + time.Duration(rnd*float64(d-half))
}

// Sleep waits d, or until done is closed: it reports false when done.
func Sleep(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
