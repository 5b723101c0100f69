package gateway

import (
	"fmt"
	"testing"

	"edgeq/gateway/config"
)

func TestNeedRestart(t *testing.T) {
	a := config.Default()
	b := a
	b.NATS.AuthToken = "a-new-token-of-some-length"
	b.LogLevel = "debug"
	b.NATS.TLS.CertFile, b.NATS.TLS.KeyFile = "c.pem", "k.pem"
	b.NSQ.TLS.CertFile, b.NSQ.TLS.KeyFile = "c.pem", "k.pem"
	if got := needRestart(a, b); len(got) != 0 {
		t.Fatalf("reloadable changes listed: %v", got)
	}
	b.NATS.MaxPayload *= 2
	b.DataDir = "/elsewhere"
	if got := fmt.Sprint(needRestart(a, b)); got != "[data_dir nats.max_payload]" {
		t.Fatalf("got %s", got)
	}
}
