package natsproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
)

// ConnectOptions are the CONNECT fields edgeq uses. Other fields clients send
// (jwt, nkey, sig, tls_required details...) are ignored.
type ConnectOptions struct {
	Verbose      bool   `json:"verbose"`       // answer every op with +OK
	Pedantic     bool   `json:"pedantic"`      // strict checking, e.g. of subjects
	TLSRequired  bool   `json:"tls_required"`  // client wants TLS
	AuthToken    string `json:"auth_token"`    // secret: redacted in String and logs
	User         string `json:"user"`          // user name for user/password auth
	Pass         string `json:"pass"`          // secret: redacted in String and logs
	Name         string `json:"name"`          // client-chosen connection name
	Lang         string `json:"lang"`          // client library language, e.g. "go"
	Version      string `json:"version"`       // client library version
	Protocol     int    `json:"protocol"`      // 0 original, 1 dynamic reconfiguration
	Echo         bool   `json:"echo"`          // deliver own publishes; true when absent
	Headers      bool   `json:"headers"`       // client understands HMSG
	NoResponders bool   `json:"no_responders"` // wants a 503 when a request has no subscriber
}

// ParseConnect decodes and checks the argument of a CONNECT op. It enforces
// what nats-server enforces: a protocol of 0 or 1, and no_responders only
// together with headers.
func ParseConnect(arg []byte) (ConnectOptions, error) {
	o := ConnectOptions{Echo: true} // nats-server's default when the field is absent
	// A JSON null would decode into nothing and pass for an empty object.
	if trimmed := bytes.TrimSpace(arg); len(trimmed) == 0 || trimmed[0] != '{' {
		return ConnectOptions{}, fmt.Errorf("%w: not a JSON object", ErrBadConnect)
	}
	if err := json.Unmarshal(arg, &o); err != nil {
		return ConnectOptions{}, fmt.Errorf("%w: %v", ErrBadConnect, err)
	}
	if o.Protocol < 0 || o.Protocol > 1 {
		return ConnectOptions{}, fmt.Errorf("%w: %d", ErrInvalidProtocol, o.Protocol)
	}
	if o.NoResponders && !o.Headers {
		return ConnectOptions{}, ErrNoRespondersRequiresHeaders
	}
	return o, nil
}

// redacted replaces secrets, keeping whether they were set.
func (o ConnectOptions) redacted() ConnectOptions {
	if o.AuthToken != "" {
		o.AuthToken = "[REDACTED]"
	}
	if o.Pass != "" {
		o.Pass = "[REDACTED]"
	}
	return o
}

// String formats the options with the token and password redacted.
func (o ConnectOptions) String() string {
	type plain ConnectOptions // no String method: no recursion
	return fmt.Sprintf("%+v", plain(o.redacted()))
}

// LogValue keeps the token and password out of slog output.
func (o ConnectOptions) LogValue() slog.Value {
	r := o.redacted()
	return slog.GroupValue(
		slog.String("name", r.Name), slog.String("lang", r.Lang), slog.String("version", r.Version),
		slog.Int("protocol", r.Protocol), slog.String("user", r.User),
		slog.String("pass", r.Pass), slog.String("auth_token", r.AuthToken),
		slog.Bool("verbose", r.Verbose), slog.Bool("pedantic", r.Pedantic),
		slog.Bool("tls_required", r.TLSRequired), slog.Bool("echo", r.Echo),
		slog.Bool("headers", r.Headers), slog.Bool("no_responders", r.NoResponders),
	)
}
