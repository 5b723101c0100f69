package uplink

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"edgeq/internal/secret"
)

// Types of uplinks.
const (
	TypeNATS = "nats"
	TypeHTTP = "http"
	TypeMQTT = "mqtt"
)

// Config is one uplink: a queue group of the node's telemetry forwarded to
// one upstream.
type Config struct {
	// Name identifies the uplink (1..64 of [A-Za-z0-9_-]); its queue group is
	// (subject, "uplink:<name>").
	Name string `yaml:"name"`
	// Type is nats, http or mqtt.
	Type string `yaml:"type"`
	// Subject is the telemetry filter forwarded (default "<prefix>.>", set by
	// the node).
	Subject string `yaml:"subject"`
	// Window bounds the records held by the uplink at once (queued and
	// awaiting the upstream's acknowledgement): its credit in the group
	// (default 256).
	Window int `yaml:"window"`
	// DeviceWindow bounds the records of one device the uplink holds at
	// once (queue.Config.DeviceWindow of its group): they go out in order
	// on one connection. 0 picks the type's default: DefaultNATSDeviceWindow
	// for nats; mqtt and http take only 1 (their order would not survive a
	// failure with more in flight).
	DeviceWindow int `yaml:"device_window"`
	// Timeout bounds one upstream operation (a publish's acknowledgement, a
	// POST) (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// RetryMin and RetryMax bound the jittered exponential delay before a
	// record that failed is sent again (default 200ms and 30s).
	RetryMin time.Duration `yaml:"retry_min"`
	RetryMax time.Duration `yaml:"retry_max"`
	// RetryAfterMax caps the wait an upstream may ask for with an HTTP
	// Retry-After (on a 429 or 503): the uplink waits the longer of its
	// backoff and the request so capped (default 5m; 0 ignores the header).
	RetryAfterMax time.Duration `yaml:"retry_after_max"`
	// RateMsgs and RateBytes cap the drain rate (per second; 0: no cap), so
	// a backlog after an outage does not flood the upstream.
	RateMsgs  float64 `yaml:"rate_msgs"`
	RateBytes float64 `yaml:"rate_bytes"`

	// TLS of the upstream connection (tls:// and https:// URLs, ssl:// brokers).
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`

	NATS NATSConfig `yaml:"nats"`
	HTTP HTTPConfig `yaml:"http"`
	MQTT MQTTConfig `yaml:"mqtt"`
}

// NATSConfig is a JetStream upstream.
type NATSConfig struct {
	// URL of the server(s), comma separated (nats://, tls://).
	URL string `yaml:"url"`
	// Subject template: literal tokens, {device} and {node} (e.g. plant3.{device}).
	Subject   string        `yaml:"subject"`
	Token     secret.String `yaml:"token"`
	User      string        `yaml:"user"`
	Password  secret.String `yaml:"password"`
	CredsFile string        `yaml:"creds_file"`
}

// HTTPConfig is an HTTP upstream.
type HTTPConfig struct {
	URL string `yaml:"url"`
	// Format is jsonl (one JSON object a line, default) or array.
	Format string `yaml:"format"`
	// Batch bounds the records of one POST (default 100), BatchBytes their
	// payload bytes (default 1MiB; a record larger than it goes alone).
	Batch      int `yaml:"batch"`
	BatchBytes int `yaml:"batch_bytes"`
	// IdempotencyHeader carries a key stable across retries of a batch
	// (default Idempotency-Key).
	IdempotencyHeader string `yaml:"idempotency_header"`
	// Headers are added to every request (e.g. Authorization). Their
	// values are secrets: no printer shows them.
	Headers map[string]secret.String `yaml:"headers"`
}

// MQTTConfig is an MQTT upstream (QoS 1, persistent session).
type MQTTConfig struct {
	// Broker is tcp://host:port or ssl://host:port.
	Broker string `yaml:"broker"`
	// Topic template: literal levels, {device} and {node}.
	Topic    string        `yaml:"topic"`
	ClientID string        `yaml:"client_id"`
	Username string        `yaml:"username"`
	Password secret.String `yaml:"password"`
}

// Defaults of Config.
const (
	DefaultWindow   = 256
	DefaultTimeout  = 10 * time.Second
	DefaultRetryMin = 200 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
	DefaultBatch    = 100
	MaxWindow       = 1 << 16
	// DefaultNATSDeviceWindow is a nats uplink's default device_window:
	// one record of a device in flight, so that a record the stream
	// refuses can never be overtaken by the next (above 1 it can).
	DefaultNATSDeviceWindow = 1
	// MaxDeviceWindow caps device_window.
	MaxDeviceWindow = 1024
)

// DefaultRetryAfterMax caps the wait an upstream's Retry-After can ask for.
const DefaultRetryAfterMax = 5 * time.Minute

// EffectiveDeviceWindow is DeviceWindow with the type's default for 0.
func (c *Config) EffectiveDeviceWindow() int {
	switch {
	case c.DeviceWindow > 0:
		return c.DeviceWindow
	case c.Type == TypeNATS:
		return DefaultNATSDeviceWindow
	}
	return 1
}

// DefaultConfig returns a Config with the defaults set.
func DefaultConfig() Config {
	return Config{Window: DefaultWindow, Timeout: DefaultTimeout, RetryMin: DefaultRetryMin, RetryMax: DefaultRetryMax,
		RetryAfterMax: DefaultRetryAfterMax,
		HTTP:          HTTPConfig{Format: "jsonl", Batch: DefaultBatch, BatchBytes: 1 << 20, IdempotencyHeader: "Idempotency-Key"}}
}

// QueueName is the uplink's queue group name.
func (c *Config) QueueName() string { return "uplink:" + c.Name }

// Validate checks the configuration; key prefixes every error (e.g.
// "uplinks[0]").
func (c *Config) Validate(key string) error {
	var errs []error
	check := func(ok bool, sub, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s.%s: %s", key, sub, fmt.Sprintf(format, args...)))
		}
	}
	check(validName(c.Name), "name", "%q, want 1..64 bytes of [A-Za-z0-9_-]", c.Name)
	check(c.Window >= 1 && c.Window <= MaxWindow, "window", "%d, want 1..%d", c.Window, MaxWindow)
	check(c.DeviceWindow >= 0 && c.DeviceWindow <= MaxDeviceWindow, "device_window", "%d, want 1..%d (0: the type's default)", c.DeviceWindow, MaxDeviceWindow)
	check(c.DeviceWindow <= 1 || c.Type == TypeNATS, "device_window", "%d: a %s uplink sends one record of a device at a time, want 1 (only nats takes more)", c.DeviceWindow, c.Type)
	check(c.Timeout >= 10*time.Millisecond, "timeout", "%v, want >= 10ms", c.Timeout)
	check(c.RetryMin > 0 && c.RetryMax >= c.RetryMin, "retry_min", "%v..%v, want 0 < retry_min <= retry_max", c.RetryMin, c.RetryMax)
	check(c.RetryAfterMax >= 0, "retry_after_max", "%v, want >= 0 (0 ignores Retry-After)", c.RetryAfterMax)
	check(c.RateMsgs >= 0 && c.RateBytes >= 0, "rate_msgs", "rate_msgs %v, rate_bytes %v, want >= 0", c.RateMsgs, c.RateBytes)
	check((c.CertFile == "") == (c.KeyFile == ""), "cert_file", "set cert_file and key_file both or neither")
	for _, f := range []struct{ key, path string }{{"ca_file", c.CAFile}, {"cert_file", c.CertFile}, {"key_file", c.KeyFile}, {"nats.creds_file", c.NATS.CredsFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			check(false, f.key, "%v", err)
		}
	}
	switch c.Type {
	case TypeNATS:
		n := c.NATS
		check(n.URL != "", "nats.url", "required")
		for _, u := range strings.Split(n.URL, ",") {
			if err := checkURL(strings.TrimSpace(u), "nats", "tls"); err != nil && n.URL != "" {
				check(false, "nats.url", "%v", err)
			}
		}
		if _, err := CompileTemplate(n.Subject, SubjectSyntax); err != nil {
			check(false, "nats.subject", "%v", err)
		}
		auths := 0
		for _, s := range []string{n.Token.Reveal(), n.User, n.CredsFile} {
			if s != "" {
				auths++
			}
		}
		check(auths <= 1, "nats", "set one of token, user/password, creds_file")
		check((n.User == "") == (n.Password == ""), "nats.password", "user and password go together")
	case TypeHTTP:
		h := c.HTTP
		check(h.URL != "", "http.url", "required")
		if err := checkURL(h.URL, "http", "https"); err != nil && h.URL != "" {
			check(false, "http.url", "%v", err)
		}
		check(h.Format == "jsonl" || h.Format == "array", "http.format", "%q, want jsonl or array", h.Format)
		check(h.Batch >= 1 && h.Batch <= 10000, "http.batch", "%d, want 1..10000", h.Batch)
		check(h.BatchBytes >= 1024, "http.batch_bytes", "%d, want >= 1024", h.BatchBytes)
		check(h.IdempotencyHeader != "", "http.idempotency_header", "empty")
	case TypeMQTT:
		m := c.MQTT
		check(m.Broker != "", "mqtt.broker", "required")
		if err := checkURL(m.Broker, "tcp", "ssl", "mqtt", "mqtts"); err != nil && m.Broker != "" {
			check(false, "mqtt.broker", "%v", err)
		}
		if _, err := CompileTemplate(m.Topic, TopicSyntax); err != nil {
			check(false, "mqtt.topic", "%v", err)
		}
		check(m.Password == "" || m.Username != "", "mqtt.password", "set without username")
	default:
		check(false, "type", "%q, want nats, http or mqtt", c.Type)
	}
	return errors.Join(errs...)
}

func checkURL(s string, schemes ...string) error {
	if secret.URLUserinfo(s) {
		// URLs show in status and logs; credentials go in the keys that
		// no printer shows.
		return fmt.Errorf("%q carries credentials: set them in token, user/password, username/password or http.headers instead", secret.RedactURL(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	for _, sc := range schemes {
		if u.Scheme == sc {
			if u.Host == "" {
				return fmt.Errorf("%q: no host", s)
			}
			return nil
		}
	}
	return fmt.Errorf("%q: scheme %q, want one of %s", s, u.Scheme, strings.Join(schemes, ", "))
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
