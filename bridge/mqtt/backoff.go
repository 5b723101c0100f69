package mqtt

import "time"

// Backoff is a jittered exponential wait: attempt n waits between half and all
// of min(Max, Min·2ⁿ). The jitter spreads the reconnects of a fleet of
// gateways that lost the same broker at the same moment.
type Backoff struct {
	Min, Max time.Duration
}

// Delay returns the wait before attempt n (0-based). rnd returns a uniform
// number in [0, 1); it is a parameter so that tests are deterministic.
func (b Backoff) Delay(attempt int, rnd func() float64) time.Duration {
	d := b.Min
	for i := 0; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max || d <= 0 { // d <= 0: overflow
		d = b.Max
	}
	half := d / 2
	return half + time.Duration(rnd()*float64(d-half))
}
