package mqtt

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func validConfig() Config {
	c := DefaultConfig()
	c.Name = "plant1"
	c.Broker = "tcp://127.0.0.1:1883"
	c.Device.Topic = "sensors/{device}/telemetry"
	return c
}

func TestValidateNamesTheBadKey(t *testing.T) {
	tests := []struct {
		name   string
		modify func(c *Config)
		want   string // substring of the error; "" means valid
	}{
		{"defaults with a template", func(c *Config) {}, ""},
		{"json field", func(c *Config) { c.Device = DeviceConfig{JSONField: "meta.device"}; c.Topics = []string{"a/#"} }, ""},
		{"ssl with files", func(c *Config) {
			c.Broker = "ssl://broker.local"
			c.CAFile, c.CertFile, c.KeyFile = "ca.pem", "c.pem", "k.pem"
		}, ""},
		{"qos 3", func(c *Config) { c.QoS = 3 }, "mqtt[plant1].qos: 3, want 0..2"},
		{"qos -1", func(c *Config) { c.QoS = -1 }, "mqtt[plant1].qos: -1, want 0..2"},
		{"empty name", func(c *Config) { c.Name = "" }, "mqtt[].name"},
		{"name with a dot", func(c *Config) { c.Name = "a.b" }, "mqtt[a.b].name"},
		{"name too long for the source", func(c *Config) { c.Name = strings.Repeat("n", 60) }, ".name"},
		{"no broker", func(c *Config) { c.Broker = "" }, "mqtt[plant1].broker: empty"},
		{"websocket broker", func(c *Config) { c.Broker = "ws://h:80" }, "mqtt[plant1].broker"},
		{"broker without host", func(c *Config) { c.Broker = "tcp://:1883" }, "no host"},
		{"ca file on tcp", func(c *Config) { c.CAFile = "ca.pem" }, "mqtt[plant1].ca_file"},
		{"cert without key", func(c *Config) { c.Broker = "ssl://h"; c.CertFile = "c.pem" }, "cert_file, key_file"},
		{"password without user", func(c *Config) { c.Password = "x" }, "mqtt[plant1].password"},
		{"no device mapping", func(c *Config) { c.Device = DeviceConfig{} }, "mqtt[plant1].device: set topic or json_field"},
		{"both mappings", func(c *Config) { c.Device.JSONField = "id" }, "not both"},
		{"template without device", func(c *Config) { c.Device.Topic = "sensors/+/x" }, "mqtt[plant1].device.topic"},
		{"two device levels", func(c *Config) { c.Device.Topic = "{device}/{device}" }, "more than one"},
		{"device inside a level", func(c *Config) { c.Device.Topic = "a/x{device}" }, "device.topic"},
		{"hash not last", func(c *Config) { c.Device.Topic = "#/{device}" }, "device.topic"},
		{"empty json key", func(c *Config) { c.Device = DeviceConfig{JSONField: "meta..id"} }, "device.json_field"},
		{"bad topic filter", func(c *Config) { c.Topics = []string{"a/b#"} }, "mqtt[plant1].topics[0]"},
		{"no topics and json", func(c *Config) { c.Device = DeviceConfig{JSONField: "id"} }, "mqtt[plant1].topics"},
		{"edgeq header", func(c *Config) { c.Headers = map[string]string{"Edgeq-Seq": "1"} }, "mqtt[plant1].headers"},
		{"queue below the window", func(c *Config) { c.QueueSize = 10 }, "mqtt[plant1].queue_size: 10"},
		{"reconnect max below min", func(c *Config) { c.ReconnectMax = time.Millisecond }, "mqtt[plant1].reconnect_max"},
		{"keep alive zero", func(c *Config) { c.KeepAlive = 0 }, "mqtt[plant1].keep_alive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDefaultsAreValidOnceNamed(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if d.QoS != 1 || d.ReconnectMax != 30*time.Second || d.QueueSize <= 20 || d.TopicHeader != DefaultTopicHeader {
		t.Fatalf("unexpected defaults: %+v", d)
	}
}

func TestConfigFromYAML(t *testing.T) {
	const doc = `
name: plant1
broker: ssl://broker.local:8883
client_id: gw-7-plant1
username: u
password: p
ca_file: /etc/edgeq/ca.pem
topics: ["sensors/+/telemetry", "legacy/#"]
qos: 2
device:
  json_field: meta.device
headers: {site: berlin}
reconnect_max: 45s
queue_size: 2048
`
	c := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ClientID != "gw-7-plant1" || c.QoS != 2 || c.Device.JSONField != "meta.device" || c.ReconnectMax != 45*time.Second ||
		c.QueueSize != 2048 || c.Headers["site"] != "berlin" || len(c.Topics) != 2 || c.KeepAlive != DefaultKeepAlive {
		t.Fatalf("decoded %+v", c)
	}
}

func TestClientIDAndTopics(t *testing.T) {
	c := validConfig()
	if got := c.EffectiveClientID("node-a"); got != "edgeq-node-a-plant1" {
		t.Errorf("derived client ID %q", got)
	}
	c.ClientID = "fixed"
	if got := c.EffectiveClientID("node-a"); got != "fixed" {
		t.Errorf("explicit client ID %q", got)
	}
	if got := c.SubscribeTopics(); len(got) != 1 || got[0] != "sensors/+/telemetry" {
		t.Errorf("derived topics %v", got)
	}
	if c.Source() != "mqtt:plant1" {
		t.Errorf("source %q", c.Source())
	}
}

func TestNewRejectsWhatItCannotRun(t *testing.T) {
	c := validConfig()
	if _, err := New(c, "", nopAppender{}, nil); err == nil || !strings.Contains(err.Error(), "client_id") {
		t.Errorf("no node ID and no client ID: %v", err)
	}
	if _, err := New(c, "n", nil, nil); err == nil {
		t.Error("nil appender accepted")
	}
	c.Broker = "ssl://h"
	c.CAFile = t.TempDir() + "/missing.pem"
	if _, err := New(c, "n", nopAppender{}, nil); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
	c = validConfig()
	c.QoS = 9
	if _, err := New(c, "n", nopAppender{}, nil); err == nil || !strings.Contains(err.Error(), "qos") {
		t.Errorf("invalid config: %v", err)
	}
}
