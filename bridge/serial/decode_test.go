package serial

import (
	"errors"
	"testing"

	"edgeq/wal"
)

func TestDecoder(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		frame   string
		device  string
		payload string
		drop    DropReason
	}{
		{"json", nil, `{"id":"m1","t":1}`, "m1", `{"id":"m1","t":1}`, dropNone},
		{"json nested", func(c *Config) { c.DeviceField = "meta.device" }, `{"meta":{"device":"m2"}}`, "m2", `{"meta":{"device":"m2"}}`, dropNone},
		{"json static overrides", func(c *Config) { c.Device = "fixed" }, `{"id":"m1"}`, "fixed", `{"id":"m1"}`, dropNone},
		{"json static any value", func(c *Config) { c.Device, c.DeviceField = "fixed", "" }, `[1,2]`, "fixed", `[1,2]`, dropNone},
		{"json invalid", nil, `{"id":"m1"`, "", "", DropMalformed},
		{"json garbage", nil, `hello world`, "", "", DropMalformed},
		{"json no device", nil, `{"t":1}`, "", "", DropBadDevice},
		{"json invalid device", nil, `{"id":"a b"}`, "", "", DropBadDevice},
		{"json device too long", nil, `{"id":"` + string(make129()) + `"}`, "", "", DropBadDevice},
		{"non utf8", nil, "{\"id\":\"m\xff\"}", "", "", DropNonUTF8},
		{"line", func(c *Config) { c.Format = FormatLine }, "m3,t=1", "m3", `{"t":1}`, dropNone},
		{"line static sets", func(c *Config) { c.Format, c.Device = FormatLine, "fixed" }, "t=1", "fixed", `{"t":1}`, dropNone},
		{"line static overrides", func(c *Config) { c.Format, c.Device = FormatLine, "fixed" }, "m3,t=1", "fixed", `{"t":1}`, dropNone},
		{"line without device", func(c *Config) { c.Format = FormatLine }, "t=1", "", "", DropBadDevice},
		{"line bad device", func(c *Config) { c.Format = FormatLine }, "m/3,t=1", "", "", DropBadDevice},
		{"line malformed", func(c *Config) { c.Format = FormatLine }, "m3,t", "", "", DropMalformed},
		{"raw", func(c *Config) { c.Format, c.Device = FormatRaw, "r1" }, "any text, at all", "r1", "any text, at all", dropNone},
		{"raw non utf8", func(c *Config) { c.Format, c.Device = FormatRaw, "r1" }, "\xc3\x28", "", "", DropNonUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			d, err := newDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dev, payload, drop, err := d.decode([]byte(tt.frame), nil)
			if drop != tt.drop {
				t.Fatalf("drop = %v (%v), want %v", drop, err, tt.drop)
			}
			if (drop == dropNone) != (err == nil) {
				t.Fatalf("drop %v with err %v", drop, err)
			}
			if drop == dropNone && (dev != tt.device || string(payload) != tt.payload) {
				t.Fatalf("decode = %q %q, want %q %q", dev, payload, tt.device, tt.payload)
			}
			if drop == DropBadDevice && tt.name == "json invalid device" && !errors.Is(err, wal.ErrBadDeviceID) {
				t.Fatalf("err = %v, want wal.ErrBadDeviceID", err)
			}
		})
	}
}

func make129() []byte {
	b := make([]byte, wal.MaxDeviceIDLen+1)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

// TestDecoderSteadyStateNoAllocations: a frame of a device already seen
// reuses the payload buffer and the device string.
func TestDecoderSteadyStateNoAllocations(t *testing.T) {
	for _, f := range []struct {
		format Format
		frame  string
	}{{FormatJSON, `{"id":"meter-1","t":21.5,"h":40}`}, {FormatLine, "meter-1,t=21.5,h=40"}} {
		cfg := validConfig()
		cfg.Format = f.format
		d, err := newDecoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 0, 256)
		frame := []byte(f.frame)
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, drop, err := d.decode(frame, buf); drop != dropNone {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per frame, want 0", f.format, allocs)
		}
	}
}
