package serial

import "time"

// Backoff is the wait before open attempt n (0 after a session that
// delivered frames): lo doubled n times, capped at hi, with "equal jitter" —
// half of it fixed, half scaled by rnd in [0,1) — so ports unplugged together
// (a USB hub) do not retry in lockstep. It is pure; rnd is an input.
func Backoff(n int, lo, hi time.Duration, rnd float64) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	half := d / 2
	rnd = min(max(rnd, 0), 1)
	return half + time.Duration(rnd*float64(d-half))
}
