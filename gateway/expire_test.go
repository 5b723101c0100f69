package gateway

import (
	"testing"
	"time"
)

func TestExpireInterval(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		0: time.Second, 2 * time.Second: time.Second, 20 * time.Second: 5 * time.Second,
		5 * time.Minute: time.Minute, 24 * time.Hour: time.Minute,
	} {
		if got := expireInterval(ttl); got != want {
			t.Errorf("group_ttl %v: every %v, want %v", ttl, got, want)
		}
	}
}
