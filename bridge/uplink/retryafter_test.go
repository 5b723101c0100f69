package uplink

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	tests := []struct {
		name, value, date string
		want              time.Duration
		ok                bool
	}{
		{"seconds", "2", "", 2 * time.Second, true},
		{"seconds with spaces", " 120 ", "", 2 * time.Minute, true},
		{"zero", "0", "", 0, false},
		{"negative", "-5", "", 0, false},
		{"fraction", "1.5", "", 0, false},
		{"trailing junk", "10s", "", 0, false},
		{"empty", "", "", 0, false},
		{"huge", "99999999999999999999999999", "", maxRetryAfterSeconds * time.Second, true},
		{"date ahead of now", date(now.Add(3 * time.Second)), "", 3 * time.Second, true},
		{"date against the response's Date", date(now.Add(time.Hour + 3*time.Second)), date(now.Add(time.Hour)), 3 * time.Second, true},
		{"bad Date header: against now", date(now.Add(5 * time.Second)), "yesterday", 5 * time.Second, true},
		{"date in the past", date(now.Add(-time.Minute)), "", 0, false},
		{"date equal to Date", date(now), date(now), 0, false},
		{"RFC 850 date", now.Add(4 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT"), "", 4 * time.Second, true},
		{"asctime date", now.Add(6 * time.Second).Format(time.ANSIC), "", 6 * time.Second, true},
		{"garbage", "soon", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := ParseRetryAfter(tt.value, tt.date, now)
			if d != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q, %q) = %v, %v; want %v, %v", tt.value, tt.date, d, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzRetryAfter: any header value and Date give no panic, a positive delay
// when ok, and nothing when not.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range [][2]string{{"2", ""}, {"Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:27:00 GMT"}, {"-1", ""}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value, date string) {
		d, ok := ParseRetryAfter(value, date, now)
		if ok && (d <= 0 || d > maxRetryAfterSeconds*time.Second) {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, ok", value, date, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, not ok", value, date, d)
		}
	})
}

// TestHTTPRetryAfter: a real HTTP server answers the first POST with a 429
// or 503 and a Retry-After, then 200. The uplink waits at least what was
// asked (capped at retry_after_max), counts it, and ignores the header when
// it is malformed, past, on another status, or retry_after_max is 0. Only
// lower bounds on the wait are asserted; the upper ones are the test's
// deadline.
func TestHTTPRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter func(date time.Time) string
		max        time.Duration
		atLeast    time.Duration
		counted    uint64
	}{
		{"503 seconds", http.StatusServiceUnavailable, func(time.Time) string { return "2" }, DefaultRetryAfterMax, 2 * time.Second, 1},
		{"429 date ahead of Date", http.StatusTooManyRequests, func(d time.Time) string { return d.Add(3 * time.Second).Format(http.TimeFormat) }, DefaultRetryAfterMax, 3 * time.Second, 1},
		{"capped by retry_after_max", http.StatusServiceUnavailable, func(time.Time) string { return "3600" }, time.Second, time.Second, 1},
		{"retry_after_max 0 ignores it", http.StatusServiceUnavailable, func(time.Time) string { return "3600" }, 0, 0, 0},
		{"malformed", http.StatusTooManyRequests, func(time.Time) string { return "soon" }, DefaultRetryAfterMax, 0, 0},
		{"date in the past", http.StatusTooManyRequests, func(d time.Time) string { return d.Add(-time.Hour).Format(http.TimeFormat) }, DefaultRetryAfterMax, 0, 0},
		{"500 has none", http.StatusInternalServerError, func(time.Time) string { return "3600" }, DefaultRetryAfterMax, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var at []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				mu.Lock()
				at = append(at, time.Now())
				n := len(at)
				mu.Unlock()
				if n == 1 {
					date := time.Now().UTC().Truncate(time.Second)
					w.Header().Set("Date", date.Format(http.TimeFormat))
					w.Header().Set("Retry-After", tt.retryAfter(date))
					w.WriteHeader(tt.status)
				}
			}))
			defer srv.Close()
			cfg := testConfig()
			cfg.Type, cfg.HTTP.URL = TypeHTTP, srv.URL
			cfg.RetryMin, cfg.RetryMax, cfg.Timeout, cfg.RetryAfterMax = 10*time.Millisecond, 50*time.Millisecond, 5*time.Second, tt.max
			u, _ := runUplink(t, cfg)
			u.Deliver(delivery(1, "dev-1", 1))
			deadline := time.Now().Add(60 * time.Second)
			for u.Stats().Acked == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("not acked within 60s: %+v", u.Stats())
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(at) < 2 {
				t.Fatalf("%d requests", len(at))
			}
			if waited := at[1].Sub(at[0]); waited < tt.atLeast {
				t.Errorf("retried after %v, want at least %v", waited, tt.atLeast)
			}
			if s := u.Stats(); s.RetryAfter != tt.counted {
				t.Errorf("retry_after %d, want %d", s.RetryAfter, tt.counted)
			}
		})
	}
}
