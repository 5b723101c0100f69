package uplink

import (
	"net/http"
	"strings"
	"time"
)

// maxRetryAfterSeconds bounds a Retry-After in seconds before it is turned
// into a Duration (larger values are taken as this many: any cap applies).
const maxRetryAfterSeconds = 1 << 31

// ParseRetryAfter reads an HTTP Retry-After value (RFC 9110 10.2.3): a
// number of seconds, or an HTTP-date measured against date (the response's
// Date header) when that parses, else against now. ok is false for a value
// that is empty, malformed, zero or in the past: the caller keeps its usual
// backoff then.
func ParseRetryAfter(value, date string, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if secs < maxRetryAfterSeconds {
				secs = secs*10 + int64(c-'0')
			}
		}
		secs = min(secs, maxRetryAfterSeconds)
		if secs == 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	ref := now
	if dt, err := http.ParseTime(strings.TrimSpace(date)); err == nil {
		ref = dt
	}
	d = at.Sub(ref)
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfterSeconds*time.Second), true
}
