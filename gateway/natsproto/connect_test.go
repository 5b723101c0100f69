package natsproto

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseConnect(t *testing.T) {
	tests := []struct {
		name string
		json string
		want ConnectOptions
	}{
		{"empty object: echo defaults to true", `{}`, ConnectOptions{Echo: true}},
		{"nats.go style", `{"verbose":false,"pedantic":false,"tls_required":false,"name":"w1","lang":"go","version":"1.55.0","protocol":1,"echo":true,"headers":true,"no_responders":true}`,
			ConnectOptions{Name: "w1", Lang: "go", Version: "1.55.0", Protocol: 1, Echo: true, Headers: true, NoResponders: true}},
		{"auth and flags", `{"verbose":true,"pedantic":true,"tls_required":true,"auth_token":"t0k","user":"u","pass":"p","echo":false}`,
			ConnectOptions{Verbose: true, Pedantic: true, TLSRequired: true, AuthToken: "t0k", User: "u", Pass: "p"}},
		{"unknown fields ignored", `{"jwt":"x","sig":"y","nkey":"z","protocol":0}`, ConnectOptions{Echo: true}},
		{"surrounding blanks", " \t{\"name\":\"n\"} ", ConnectOptions{Name: "n", Echo: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConnect([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseConnectRejects(t *testing.T) {
	tests := []struct {
		name string
		json string
		want error
	}{
		{"not json", `verbose`, ErrBadConnect},
		{"null", `null`, ErrBadConnect},
		{"array", `[]`, ErrBadConnect},
		{"empty", ``, ErrBadConnect},
		{"truncated", `{"name":"x"`, ErrBadConnect},
		{"wrong type", `{"verbose":"yes"}`, ErrBadConnect},
		{"trailing junk", `{} x`, ErrBadConnect},
		{"protocol 2", `{"protocol":2}`, ErrInvalidProtocol},
		{"protocol -1", `{"protocol":-1}`, ErrInvalidProtocol},
		{"no_responders without headers", `{"no_responders":true}`, ErrNoRespondersRequiresHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseConnect([]byte(tt.json)); !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestConnectOptionsKeepSecretsOutOfLogs(t *testing.T) {
	o := ConnectOptions{Name: "w1", User: "alice", Pass: "hunter2", AuthToken: "s3cret"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("connect", "opts", o)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("connect", "opts", o)
	for _, out := range []string{o.String(), fmt.Sprintf("%v %+v %s", o, o, o), logged.String()} {
		if strings.Contains(out, "hunter2") || strings.Contains(out, "s3cret") {
			t.Fatalf("secret leaked: %s", out)
		}
		if !strings.Contains(out, "alice") || !strings.Contains(out, "[REDACTED]") {
			t.Fatalf("expected user and redaction marker in: %s", out)
		}
	}
}
