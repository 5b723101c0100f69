package mqtt

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"edgeq/internal/secret"
	"edgeq/wal"
)

// Config is one MQTT bridge: a broker, the topic filters it subscribes to and
// how a message becomes a device's record.
type Config struct {
	// Name identifies the bridge in logs, status and the record source
	// ("mqtt:<name>"): 1–59 bytes of [A-Za-z0-9_-].
	Name string `yaml:"name"`
	// Broker is tcp://host:port or ssl://host:port (mqtt:// and mqtts:// are
	// accepted too). A missing port means 1883 or 8883.
	Broker string `yaml:"broker"`
	// ClientID must be stable (the broker keeps the persistent session under it)
	// and unique (two clients with one ID kick each other off in a loop).
	// Empty: "edgeq-<node id>-<name>".
	ClientID string        `yaml:"client_id"`
	Username string        `yaml:"username"`
	Password secret.String `yaml:"password"`
	// CAFile verifies the broker's certificate (ssl:// only; empty: system roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate, both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// Topics are the MQTT topic filters to subscribe to. Empty: derived from
	// device.topic with {device} replaced by '+'.
	Topics []string `yaml:"topics"`
	// QoS of the subscriptions, 0..2 (default 1). QoS 1 and 2 are acknowledged
	// only once stored; QoS 0 is best effort.
	QoS int `yaml:"qos"`
	// Device says where a message's device ID comes from.
	Device DeviceConfig `yaml:"device"`
	// Headers are added to every record as static key/value pairs.
	Headers map[string]string `yaml:"headers"`
	// TopicHeader is the header key that carries the message's MQTT topic
	// (default "Mqtt-Topic"; "-" leaves the topic out).
	TopicHeader string `yaml:"topic_header"`
	// KeepAlive is the MQTT keep-alive (default 30s).
	KeepAlive time.Duration `yaml:"keep_alive"`
	// ConnectTimeout bounds one connection attempt and the subscription
	// (default 10s).
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// ReconnectMin and ReconnectMax bound the jittered exponential wait between
	// connection attempts (default 1s and 30s). The same wait is used before a
	// reconnection forced by a storage error.
	ReconnectMin time.Duration `yaml:"reconnect_min"`
	ReconnectMax time.Duration `yaml:"reconnect_max"`
	// QueueSize bounds the messages waiting between paho's router and the
	// appender, and the appends waiting for durability (default 1024). Socket
	// reads pause while it is a quarter full, so that a burst waits in the
	// broker; QoS 0 messages may only fill half of it and are dropped
	// (counted) beyond that.
	QueueSize int `yaml:"queue_size"`
	// LogInterval is the least time between two log lines about unmappable or
	// dropped messages of one reason (default 10s); the rest are counted.
	LogInterval time.Duration `yaml:"log_interval"`
}

// DeviceConfig maps a message to a device ID. Exactly one field is set.
type DeviceConfig struct {
	// Topic is a topic template: MQTT levels with one level "{device}", e.g.
	// "sensors/{device}/telemetry", "+/{device}/#".
	Topic string `yaml:"topic"`
	// JSONField is a dot path into a JSON object payload, e.g. "meta.device";
	// the value must be a string or an integer.
	JSONField string `yaml:"json_field"`
}

// Defaults of Config.
const (
	DefaultQoS            = 1
	DefaultTopicHeader    = "Mqtt-Topic"
	DefaultKeepAlive      = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultReconnectMin   = time.Second
	DefaultReconnectMax   = 30 * time.Second
	DefaultQueueSize      = 1024
	DefaultLogInterval    = 10 * time.Second

	// maxNameLen keeps "mqtt:" + name within wal.MaxSourceLen.
	maxNameLen = wal.MaxSourceLen - len(sourcePrefix)
	// minQueueSize leaves room above the read-pause mark (a quarter) for what
	// is already buffered when reads pause.
	minQueueSize = 64
	maxQueueSize = 1 << 20
	// maxClientIDLen is MQTT's string limit.
	maxClientIDLen = 65535
)

const sourcePrefix = "mqtt:"

// DefaultConfig returns a Config with every default set; Name, Broker and
// Device are left for the caller.
func DefaultConfig() Config {
	return Config{
		QoS:            DefaultQoS,
		TopicHeader:    DefaultTopicHeader,
		KeepAlive:      DefaultKeepAlive,
		ConnectTimeout: DefaultConnectTimeout,
		ReconnectMin:   DefaultReconnectMin,
		ReconnectMax:   DefaultReconnectMax,
		QueueSize:      DefaultQueueSize,
		LogInterval:    DefaultLogInterval,
	}
}

// Validate checks the configuration and names every bad key as
// mqtt[<name>].<key>.
func (c *Config) Validate() error {
	var errs []error
	key := "mqtt[" + c.Name + "]."
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(key+format, args...))
		}
	}
	check(validName(c.Name), "name: %q, want 1..%d bytes of [A-Za-z0-9_-]", c.Name, maxNameLen)
	if _, err := parseBroker(c.Broker); err != nil {
		errs = append(errs, fmt.Errorf("%sbroker: %w", key, err))
	}
	check(len(c.ClientID) <= maxClientIDLen, "client_id: %d bytes, want at most %d", len(c.ClientID), maxClientIDLen)
	check(c.Password == "" || c.Username != "", "password: set without username")
	check((c.CertFile == "") == (c.KeyFile == ""), "cert_file, key_file: set both or neither")
	if !isTLS(c.Broker) {
		check(c.CAFile == "" && c.CertFile == "", "ca_file, cert_file: need an ssl:// broker")
	}
	check(c.QoS >= 0 && c.QoS <= 2, "qos: %d, want 0..2", c.QoS)
	errs = append(errs, c.validateDevice(key)...)
	for i, f := range c.Topics {
		if err := ValidateTopicFilter(f); err != nil {
			errs = append(errs, fmt.Errorf("%stopics[%d]: %w", key, i, err))
		}
	}
	check(len(c.Topics) > 0 || c.Device.Topic != "", "topics: empty, and no device.topic to derive one from")
	check(len(c.Headers)+1 <= wal.MaxHeaders, "headers: %d, want at most %d", len(c.Headers), wal.MaxHeaders-1)
	for k := range c.Headers {
		check(k != "" && !strings.HasPrefix(strings.ToLower(k), "edgeq-"), "headers: key %q, want non-empty and not Edgeq-*", k)
	}
	check(c.TopicHeader != "", "topic_header: empty, want a key or \"-\"")
	check(c.KeepAlive >= time.Second, "keep_alive: %v, want >= 1s", c.KeepAlive)
	check(c.ConnectTimeout >= 100*time.Millisecond, "connect_timeout: %v, want >= 100ms", c.ConnectTimeout)
	check(c.ReconnectMin > 0, "reconnect_min: %v, want > 0", c.ReconnectMin)
	check(c.ReconnectMax >= c.ReconnectMin, "reconnect_max: %v, want >= reconnect_min (%v)", c.ReconnectMax, c.ReconnectMin)
	check(c.QueueSize >= minQueueSize && c.QueueSize <= maxQueueSize, "queue_size: %d, want %d..%d", c.QueueSize, minQueueSize, maxQueueSize)
	check(c.LogInterval > 0, "log_interval: %v, want > 0", c.LogInterval)
	return errors.Join(errs...)
}

func (c *Config) validateDevice(key string) []error {
	d := c.Device
	switch {
	case d.Topic == "" && d.JSONField == "":
		return []error{fmt.Errorf("%sdevice: set topic or json_field", key)}
	case d.Topic != "" && d.JSONField != "":
		return []error{fmt.Errorf("%sdevice: set topic or json_field, not both", key)}
	case d.Topic != "":
		if _, err := CompileTemplate(d.Topic); err != nil {
			return []error{fmt.Errorf("%sdevice.topic: %w", key, err)}
		}
	default:
		if _, err := ParseJSONField(d.JSONField); err != nil {
			return []error{fmt.Errorf("%sdevice.json_field: %w", key, err)}
		}
	}
	return nil
}

// SubscribeTopics returns the topic filters the bridge subscribes to.
func (c *Config) SubscribeTopics() []string {
	if len(c.Topics) > 0 {
		return c.Topics
	}
	if t, err := CompileTemplate(c.Device.Topic); err == nil {
		return []string{t.Filter()}
	}
	return nil
}

// EffectiveClientID is ClientID, or "edgeq-<nodeID>-<name>" when it is empty.
func (c *Config) EffectiveClientID(nodeID string) string {
	if c.ClientID != "" {
		return c.ClientID
	}
	return "edgeq-" + nodeID + "-" + c.Name
}

// Source is the record source label of this bridge.
func (c *Config) Source() string { return sourcePrefix + c.Name }

func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseBroker checks a broker URL and fills in the default port.
func parseBroker(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("empty, want tcp://host:port or ssl://host:port")
	}
	if secret.URLUserinfo(s) {
		// The broker URL shows in status and logs; credentials go in
		// username and password, which no printer shows.
		return nil, fmt.Errorf("%q carries credentials: set username and password instead", secret.RedactURL(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	port := ""
	switch u.Scheme {
	case "tcp", "mqtt":
		port = "1883"
	case "ssl", "tls", "mqtts":
		port = "8883"
	default:
		return nil, fmt.Errorf("%q: scheme %q, want tcp, mqtt, ssl, tls or mqtts", s, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q: no host", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("%q: unexpected path or query", s)
	}
	if u.Port() == "" {
		u.Host += ":" + port
	}
	return u, nil
}

func isTLS(broker string) bool {
	u, err := url.Parse(broker)
	return err == nil && (u.Scheme == "ssl" || u.Scheme == "tls" || u.Scheme == "mqtts")
}
