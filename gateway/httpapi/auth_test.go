package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"

	"edgeq/internal/secret"
	"edgeq/wal"
)

// TestAuthorized: with http.token set, the API wants it as a bearer token;
// the token is read per request, so a reload that sets, changes or clears
// it applies to the next request. nsqd's endpoints take nsq.auth_token too.
func TestAuthorized(t *testing.T) {
	var token atomic.Pointer[secret.String]
	set := func(s secret.String) { token.Store(&s) }
	set("")
	s := &Server{cfg: Config{Token: func() secret.String { return *token.Load() }, NSQToken: "nsq-t0ken"}}
	h := s.authorized(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	tests := []struct {
		token, auth string
		want        int
		nsq         bool
	}{
		{"", "", http.StatusNoContent, true},
		{"", "Bearer whatever", http.StatusNoContent, true},
		{"s3cret", "", http.StatusUnauthorized, false},
		{"s3cret", "Bearer nope", http.StatusUnauthorized, false},
		{"s3cret", "s3cret", http.StatusUnauthorized, false}, // no "Bearer "
		{"s3cret", "Bearer s3cret", http.StatusNoContent, true},
		{"s3cret", "Bearer nsq-t0ken", http.StatusUnauthorized, true},
		{"other", "Bearer s3cret", http.StatusUnauthorized, false}, // after a reload
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("token %q auth %q", tt.token, tt.auth), func(t *testing.T) {
			set(secret.String(tt.token))
			req := httptest.NewRequest("GET", "/v1/status", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d", rec.Code, tt.want)
			}
			if tt.want == http.StatusUnauthorized && (rec.Header().Get("WWW-Authenticate") == "" || rec.Body.String() != "{\n  \"error\": \"missing or wrong bearer token\"\n}\n") {
				t.Errorf("refusal: %q %q", rec.Header().Get("WWW-Authenticate"), rec.Body)
			}
			if got := s.nsqAuthorized(req); got != tt.nsq && tt.auth != "" && tt.token != "" {
				t.Errorf("nsq authorized %v, want %v", got, tt.nsq)
			}
		})
	}
}

func TestPublishStatus(t *testing.T) {
	for err, want := range map[error]int{
		fmt.Errorf("x: %w", wal.ErrBadDeviceID):    http.StatusBadRequest,
		fmt.Errorf("x: %w", wal.ErrTooLarge):       http.StatusRequestEntityTooLarge,
		fmt.Errorf("x: %w", wal.ErrFull):           http.StatusInsufficientStorage,
		fmt.Errorf("x: %w", syscall.ENOSPC):        http.StatusInsufficientStorage,
		fmt.Errorf("x: %w", wal.ErrTooManyDevices): http.StatusTooManyRequests,
		errors.New("log closed"):                   http.StatusServiceUnavailable,
	} {
		if got := publishStatus(err); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
}
