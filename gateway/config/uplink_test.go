package config

import (
	"strings"
	"testing"
	"time"

	"edgeq/bridge/uplink"
)

func TestUplinkConfig(t *testing.T) {
	cfg, err := Load(writeFile(t, `
uplinks:
  - name: cloud
    type: nats
    rate_msgs: 500
    nats: {url: "nats://127.0.0.1:4222", subject: "plant3.{device}", token: s3cret}
  - name: web
    type: http
    timeout: 2s
    http: {url: "https://ingest.example.com/v1", format: array, batch: 20, headers: {Authorization: Bearer x}}
  - name: iot
    type: mqtt
    mqtt: {broker: "ssl://127.0.0.1:8883", topic: "dt/{node}/{device}"}
`), nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Uplinks) != 3 {
		t.Fatalf("%d uplinks", len(cfg.Uplinks))
	}
	n := uplink.Config(cfg.Uplinks[0])
	if n.Window != uplink.DefaultWindow || n.RateMsgs != 500 || n.NATS.Token != "s3cret" || n.Timeout != uplink.DefaultTimeout {
		t.Errorf("nats uplink %+v", n)
	}
	if h := uplink.Config(cfg.Uplinks[1]); h.HTTP.Batch != 20 || h.HTTP.Format != "array" || h.Timeout != 2*time.Second ||
		h.HTTP.IdempotencyHeader != "Idempotency-Key" || h.HTTP.Headers["Authorization"] != "Bearer x" {
		t.Errorf("http uplink %+v", h)
	}
}

func TestUplinkConfigRefused(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown type", "uplinks: [{name: a, type: kafka}]", `uplinks[0].type: "kafka"`},
		{"unknown key", "uplinks: [{name: a, type: nats, colour: red}]", "colour"},
		{"bad name", "uplinks: [{name: 'a b', type: http, http: {url: 'http://127.0.0.1:1'}}]", "uplinks[0].name"},
		{"no url", "uplinks: [{name: a, type: nats, nats: {subject: 'x.{device}'}}]", "uplinks[0].nats.url: required"},
		{"bad url scheme", "uplinks: [{name: a, type: nats, nats: {url: 'http://x:1', subject: x}}]", "uplinks[0].nats.url"},
		{"bad subject template", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: 'plant.{dev}'}}]", "uplinks[0].nats.subject: template"},
		{"wildcard subject", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: 'plant.*'}}]", "uplinks[0].nats.subject"},
		{"empty token", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: 'plant..{device}'}}]", "empty subject token"},
		{"bad topic template", "uplinks: [{name: a, type: mqtt, mqtt: {broker: 'tcp://x:1', topic: 'a/+/{device}'}}]", "uplinks[0].mqtt.topic"},
		{"password without user", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: s, password: p}}]", "uplinks[0].nats.password"},
		{"two credentials", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: s, token: t, user: u, password: p}}]", "uplinks[0].nats: set one of"},
		{"missing creds file", "uplinks: [{name: a, type: nats, nats: {url: 'nats://x:1', subject: s, creds_file: /nonexistent/x.creds}}]", "uplinks[0].nats.creds_file"},
		{"cert without key", "uplinks: [{name: a, type: mqtt, cert_file: /etc/hostname, mqtt: {broker: 'ssl://x:1', topic: t}}]", "uplinks[0].cert_file"},
		{"mqtt password without user", "uplinks: [{name: a, type: mqtt, mqtt: {broker: 'tcp://x:1', topic: t, password: p}}]", "uplinks[0].mqtt.password"},
		{"http format", "uplinks: [{name: a, type: http, http: {url: 'http://x:1', format: csv}}]", "uplinks[0].http.format"},
		{"window", "uplinks: [{name: a, type: http, window: 0, http: {url: 'http://x:1'}}]", "uplinks[0].window"},
		{"subject outside telemetry", "uplinks: [{name: a, type: http, subject: 'other.>', http: {url: 'http://x:1'}}]", "uplinks[0].subject"},
		{"twice", "uplinks: [{name: a, type: http, http: {url: 'http://x:1'}}, {name: a, type: http, http: {url: 'http://x:1'}}]", "uplinks[1].name"},
		// A URL shows in status and logs: credentials in it are refused, and
		// the refusal does not echo them.
		{"token in nats url", "uplinks: [{name: a, type: nats, nats: {url: 'nats://127.0.0.1:1,nats://SECRETTOK@x:1', subject: s}}]", `uplinks[0].nats.url: "nats://<hidden>@x:1" carries credentials`},
		{"password in http url", "uplinks: [{name: a, type: http, http: {url: 'https://u:SECRETPW@x:1/in'}}]", `uplinks[0].http.url: "https://<hidden>@x:1/in" carries credentials`},
		{"password in mqtt broker", "uplinks: [{name: a, type: mqtt, mqtt: {broker: 'tcp://u:SECRETPW@x:1', topic: t}}]", "uplinks[0].mqtt.broker"},
		{"password in mqtt bridge broker", "mqtt: [{name: b, broker: 'tcp://u:SECRETPW@x:1', device: {topic: 's/{device}'}}]", "mqtt[b].broker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeFile(t, tt.yaml), nil, Flags{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error shows the credential: %v", err)
			}
		})
	}
}
