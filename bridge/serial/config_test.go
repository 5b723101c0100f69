package serial

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"edgeq/wal"
)

func validConfig() Config {
	c := DefaultConfig()
	c.Name = "rs485"
	c.Path = "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K4ZQX-if00-port0"
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" means valid
	}{
		{"defaults with name and path", func(*Config) {}, ""},
		{"line format", func(c *Config) { c.Format = FormatLine }, ""},
		{"raw with device", func(c *Config) { c.Format, c.Device = FormatRaw, "meter-1" }, ""},
		{"json with device only", func(c *Config) { c.DeviceField, c.Device = "", "meter-1" }, ""},
		{"nested device field", func(c *Config) { c.DeviceField = "meta.device" }, ""},
		{"7E2 mark", func(c *Config) { c.DataBits, c.Parity, c.StopBits = 7, ParityMark, 2 }, ""},
		{"baud zero", func(c *Config) { c.Baud = 0 }, "serial[rs485].baud: 0"},
		{"baud too high", func(c *Config) { c.Baud = 20_000_000 }, "serial[rs485].baud: 20000000"},
		{"empty name", func(c *Config) { c.Name = "" }, "serial[].name"},
		{"name with space", func(c *Config) { c.Name = "rs 485" }, "serial[rs 485].name"},
		{"name too long for source", func(c *Config) { c.Name = strings.Repeat("a", 58) }, ".name"},
		{"relative path", func(c *Config) { c.Path = "ttyUSB0" }, "serial[rs485].path"},
		{"data bits 9", func(c *Config) { c.DataBits = 9 }, "serial[rs485].data_bits: 9"},
		{"parity", func(c *Config) { c.Parity = "weird" }, "serial[rs485].parity"},
		{"stop bits 1.5 as 3", func(c *Config) { c.StopBits = 3 }, "serial[rs485].stop_bits: 3"},
		{"max frame small", func(c *Config) { c.MaxFrame = 8 }, "serial[rs485].max_frame: 8"},
		{"max frame large", func(c *Config) { c.MaxFrame = 1 << 20 }, "serial[rs485].max_frame"},
		{"format", func(c *Config) { c.Format = "csv" }, "serial[rs485].format"},
		{"json without device", func(c *Config) { c.DeviceField = "" }, "serial[rs485].device_field"},
		{"empty path segment", func(c *Config) { c.DeviceField = "meta..id" }, "serial[rs485].device_field"},
		{"raw without device", func(c *Config) { c.Format = FormatRaw }, "serial[rs485].device"},
		{"bad device", func(c *Config) { c.Device = "a b" }, "serial[rs485].device"},
		{"reserved header", func(c *Config) { c.Headers = map[string]string{"Edgeq-Seq": "1"} }, "serial[rs485].headers"},
		{"header newline", func(c *Config) { c.Headers = map[string]string{"site": "a\nb"} }, "serial[rs485].headers"},
		{"max pending", func(c *Config) { c.MaxPending = 0 }, "serial[rs485].max_pending"},
		{"read timeout", func(c *Config) { c.ReadTimeout = 0 }, "serial[rs485].read_timeout"},
		{"reopen max below min", func(c *Config) { c.ReopenMax = time.Millisecond }, "serial[rs485].reopen_max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want it to wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigYAMLAndDefaults(t *testing.T) {
	doc := `
name: rs485
path: /dev/serial/by-id/usb-x
baud: 9600
data_bits: 7
parity: even
stop_bits: 2
max_frame: 512
format: json
device_field: meta.device
headers:
  site: plant-1
max_pending: 64
read_timeout: 300ms
`
	var c Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults()
	want := Config{
		Name: "rs485", Path: "/dev/serial/by-id/usb-x", Baud: 9600, DataBits: 7, Parity: ParityEven,
		StopBits: 2, MaxFrame: 512, Format: FormatJSON, DeviceField: "meta.device",
		Headers: map[string]string{"site": "plant-1"}, MaxPending: 64, ReadTimeout: 300 * time.Millisecond,
		ReopenMin: 100 * time.Millisecond, ReopenMax: 5 * time.Second,
	}
	if c.Name != want.Name || c.Path != want.Path || c.Baud != want.Baud || c.DataBits != want.DataBits ||
		c.Parity != want.Parity || c.StopBits != want.StopBits || c.MaxFrame != want.MaxFrame ||
		c.Format != want.Format || c.DeviceField != want.DeviceField || c.Headers["site"] != "plant-1" ||
		c.MaxPending != want.MaxPending || c.ReadTimeout != want.ReadTimeout ||
		c.ReopenMin != want.ReopenMin || c.ReopenMax != want.ReopenMax {
		t.Fatalf("decoded %+v\nwant    %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.mode()
	if m.BaudRate != 9600 || m.DataBits != 7 {
		t.Fatalf("mode %+v", m)
	}
}

func TestConfigWithDefaultsLineFormatKeepsDeviceFieldEmpty(t *testing.T) {
	c := Config{Name: "a", Path: "/dev/x", Format: FormatLine}.WithDefaults()
	if c.DeviceField != "" || c.Baud != 115200 || c.MaxFrame != 4096 {
		t.Fatalf("WithDefaults() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigHeadersSortedAndSource(t *testing.T) {
	c := validConfig()
	c.Headers = map[string]string{"zone": "b", "site": "a", "line": "c"}
	got := c.headers()
	want := []wal.Header{{Key: "line", Value: "c"}, {Key: "site", Value: "a"}, {Key: "zone", Value: "b"}}
	if len(got) != len(want) {
		t.Fatalf("headers() = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("headers() = %v, want %v", got, want)
		}
	}
	if s := c.source(); s != "serial:rs485" {
		t.Fatalf("source() = %q", s)
	}
	c.Name = strings.Repeat("n", maxNameLen)
	if err := c.Validate(); err != nil || len(c.source()) != wal.MaxSourceLen {
		t.Fatalf("longest name: err %v, source %d bytes", err, len(c.source()))
	}
}
