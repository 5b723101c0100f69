package uplink

import "time"

// MaxHold bounds how long a record can wait in the uplink before it
// answers: an in-place retry (the backoff, or for HTTP a Retry-After up to
// retry_after_max, plus the timeout) twice over plus a minute, and twice
// the time a full window takes to drain at rate_msgs and rate_bytes (with
// records of maxPayload bytes). The uplink's queue group's ack_wait must
// outlast it, or it would redeliver a record the uplink still holds.
func (c *Config) MaxHold(maxPayload int64) time.Duration {
	wait := c.RetryMax
	if c.Type == TypeHTTP { // only HTTP answers carry a Retry-After
		wait = max(wait, c.RetryAfterMax)
	}
	w := 2*(wait+c.Timeout) + time.Minute
	if c.RateMsgs > 0 {
		w += time.Duration(2 * float64(c.Window) / c.RateMsgs * float64(time.Second))
	}
	if c.RateBytes > 0 {
		w += time.Duration(2 * float64(c.Window) * float64(maxPayload) / c.RateBytes * float64(time.Second))
	}
	return w
}
