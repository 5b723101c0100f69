package serial

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	bugst "go.bug.st/serial"

	"edgeq/wal"
)

// Format says how a frame becomes a record.
type Format string

// Frame formats.
const (
	// FormatJSON: the frame is a JSON document, stored as is; the device ID is
	// the string (or integer) at DeviceField, unless Device is set.
	FormatJSON Format = "json"
	// FormatLine: `device,key=value,...` stored as a JSON object; values that
	// are JSON numbers become numbers, everything else a string.
	FormatLine Format = "line"
	// FormatRaw: the frame is stored as is under the fixed Device.
	FormatRaw Format = "raw"
)

// Parity of the serial line.
type Parity string

// Parities.
const (
	ParityNone  Parity = "none"
	ParityOdd   Parity = "odd"
	ParityEven  Parity = "even"
	ParityMark  Parity = "mark"
	ParitySpace Parity = "space"
)

// Limits of the configuration, so a typo cannot make a buffer unbounded.
const (
	maxNameLen      = wal.MaxSourceLen - len(sourcePrefix)
	maxFrameLimit   = 64 << 10
	minFrameLimit   = 16
	maxPendingLimit = 1 << 16
	maxHeaders      = 16
	maxHeaderKey    = 64
	maxHeaderValue  = 1024
	maxPathSegments = 8
	maxSegmentLen   = 128
	sourcePrefix    = "serial:"
)

// Config of one serial port. Start from DefaultConfig; Validate checks the
// values as they are (a zero baud is an error), WithDefaults fills zero
// fields for callers that decode a list of ports.
type Config struct {
	// Name identifies the port in logs, status and the record source
	// ("serial:<name>"): 1–57 bytes of [A-Za-z0-9_.-]. Required.
	Name string `yaml:"name"`
	// Path of the device node. Prefer /dev/serial/by-id/...: a replugged
	// adapter often comes back as another ttyUSBn. Required.
	Path string `yaml:"path"`
	// Baud rate in bits per second. Default 115200.
	Baud int `yaml:"baud"`
	// DataBits per character, 5..8. Default 8.
	DataBits int `yaml:"data_bits"`
	// Parity: none (default), odd, even, mark or space.
	Parity Parity `yaml:"parity"`
	// StopBits: 1 (default) or 2.
	StopBits int `yaml:"stop_bits"`
	// MaxFrame is the longest frame in bytes, line terminator excluded.
	// Longer frames are dropped up to the next newline. Default 4096.
	MaxFrame int `yaml:"max_frame"`
	// Format is json (default), line or raw.
	Format Format `yaml:"format"`
	// DeviceField is the dot path of the device ID in a json frame ("id",
	// "meta.device"). Only used by format json. Default "id".
	DeviceField string `yaml:"device_field"`
	// Device, when set, is the device ID of every frame: required for raw,
	// and it overrides the frame's device for json and line.
	Device string `yaml:"device"`
	// Headers are added to every record (at most 16; keys of
	// [A-Za-z0-9_.-], not starting with "Edgeq-").
	Headers map[string]string `yaml:"headers"`
	// MaxPending bounds the appends in flight; the reader waits beyond it.
	// Default 1024.
	MaxPending int `yaml:"max_pending"`
	// ReadTimeout is how long one Read waits for data, so that Stop is
	// noticed within it. Default 200ms.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// ReopenMin and ReopenMax bound the jittered exponential backoff between
	// open attempts. Defaults 100ms and 5s.
	ReopenMin time.Duration `yaml:"reopen_min"`
	ReopenMax time.Duration `yaml:"reopen_max"`
}

// DefaultConfig returns the documented defaults; Name and Path are empty.
func DefaultConfig() Config {
	return Config{
		Baud:        115200,
		DataBits:    8,
		Parity:      ParityNone,
		StopBits:    1,
		MaxFrame:    4096,
		Format:      FormatJSON,
		DeviceField: "id",
		MaxPending:  1024,
		ReadTimeout: 200 * time.Millisecond,
		ReopenMin:   100 * time.Millisecond,
		ReopenMax:   5 * time.Second,
	}
}

// WithDefaults returns c with every zero field taken from DefaultConfig.
// DeviceField is defaulted only for format json without a Device.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&c.Baud, d.Baud)
	setInt(&c.DataBits, d.DataBits)
	setInt(&c.StopBits, d.StopBits)
	setInt(&c.MaxFrame, d.MaxFrame)
	setInt(&c.MaxPending, d.MaxPending)
	setDur(&c.ReadTimeout, d.ReadTimeout)
	setDur(&c.ReopenMin, d.ReopenMin)
	setDur(&c.ReopenMax, d.ReopenMax)
	if c.Parity == "" {
		c.Parity = d.Parity
	}
	if c.Format == "" {
		c.Format = d.Format
	}
	if c.Format == FormatJSON && c.DeviceField == "" && c.Device == "" {
		c.DeviceField = d.DeviceField
	}
	return c
}

// Validate reports every field that is out of range, each named as
// `serial[<name>].<key>`.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: serial[%s].%s: %s", ErrInvalidConfig, c.Name, key, fmt.Sprintf(format, args...)))
	}
	if err := validateName(c.Name); err != nil {
		bad("name", "%q: %v", c.Name, err)
	}
	if c.Path == "" || !filepath.IsAbs(c.Path) {
		bad("path", "%q, want an absolute path", c.Path)
	}
	c.lineMode().Check(bad)
	if c.MaxFrame < minFrameLimit || c.MaxFrame > maxFrameLimit {
		bad("max_frame", "%d, want %d..%d", c.MaxFrame, minFrameLimit, maxFrameLimit)
	}
	if c.Device != "" {
		if err := wal.ValidateDeviceID(c.Device); err != nil {
			bad("device", "%q: %v", c.Device, err)
		}
	}
	switch c.Format {
	case FormatJSON:
		if c.DeviceField == "" && c.Device == "" {
			bad("device_field", "empty, format json needs device_field or device")
		}
		if c.DeviceField != "" {
			if _, err := splitDevicePath(c.DeviceField); err != nil {
				bad("device_field", "%q: %v", c.DeviceField, err)
			}
		}
	case FormatLine:
	case FormatRaw:
		if c.Device == "" {
			bad("device", "empty, format raw needs a fixed device")
		}
	default:
		bad("format", "%q, want json, line or raw", c.Format)
	}
	if len(c.Headers) > maxHeaders {
		bad("headers", "%d headers, at most %d", len(c.Headers), maxHeaders)
	}
	for k, v := range c.Headers {
		if err := validateHeader(k, v); err != nil {
			bad("headers", "%q: %v", k, err)
		}
	}
	if c.MaxPending < 1 || c.MaxPending > maxPendingLimit {
		bad("max_pending", "%d, want 1..%d", c.MaxPending, maxPendingLimit)
	}
	if c.ReadTimeout < 10*time.Millisecond || c.ReadTimeout > 5*time.Second {
		bad("read_timeout", "%v, want 10ms..5s", c.ReadTimeout)
	}
	if c.ReopenMin <= 0 || c.ReopenMin > time.Minute {
		bad("reopen_min", "%v, want > 0 and <= 1m", c.ReopenMin)
	}
	if c.ReopenMax < c.ReopenMin || c.ReopenMax > 10*time.Minute {
		bad("reopen_max", "%v, want reopen_min..10m", c.ReopenMax)
	}
	return errors.Join(errs...)
}

func validateName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("want 1..%d bytes", maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("byte %d is not one of [A-Za-z0-9_.-]", i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-'
}

func validateHeader(k, v string) error {
	if k == "" || len(k) > maxHeaderKey {
		return fmt.Errorf("key length %d, want 1..%d", len(k), maxHeaderKey)
	}
	for i := 0; i < len(k); i++ {
		if !nameByte(k[i]) {
			return fmt.Errorf("key byte %d is not one of [A-Za-z0-9_.-]", i)
		}
	}
	if len(k) >= 6 && strings.EqualFold(k[:6], "edgeq-") {
		return errors.New("the Edgeq- prefix is reserved for the node")
	}
	if len(v) > maxHeaderValue || !utf8.ValidString(v) || strings.ContainsFunc(v, isControl) {
		return fmt.Errorf("value must be UTF-8 without control characters, at most %d bytes", maxHeaderValue)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// splitDevicePath splits a dot path ("meta.device") into its object keys.
func splitDevicePath(p string) ([]string, error) {
	segs := strings.Split(p, ".")
	if len(segs) > maxPathSegments {
		return nil, fmt.Errorf("%d segments, at most %d", len(segs), maxPathSegments)
	}
	for i, s := range segs {
		if s == "" || len(s) > maxSegmentLen {
			return nil, fmt.Errorf("segment %d is empty or longer than %d bytes", i+1, maxSegmentLen)
		}
		if !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) {
			return nil, fmt.Errorf("segment %d must be UTF-8 without control characters", i+1)
		}
	}
	return segs, nil
}

var parities = map[Parity]bugst.Parity{
	ParityNone:  bugst.NoParity,
	ParityOdd:   bugst.OddParity,
	ParityEven:  bugst.EvenParity,
	ParityMark:  bugst.MarkParity,
	ParitySpace: bugst.SpaceParity,
}

// LineMode is the character format of a serial line.
type LineMode struct {
	Baud     int
	DataBits int
	Parity   Parity
	StopBits int
}

// Check calls bad for each setting out of range, with its yaml key (baud,
// data_bits, parity, stop_bits).
func (m LineMode) Check(bad func(key, format string, args ...any)) {
	if m.Baud < 50 || m.Baud > 12_000_000 {
		bad("baud", "%d, want 50..12000000", m.Baud)
	}
	if m.DataBits < 5 || m.DataBits > 8 {
		bad("data_bits", "%d, want 5..8", m.DataBits)
	}
	if _, ok := parities[m.Parity]; !ok {
		bad("parity", "%q, want none, odd, even, mark or space", m.Parity)
	}
	if m.StopBits != 1 && m.StopBits != 2 {
		bad("stop_bits", "%d, want 1 or 2", m.StopBits)
	}
}

// CharBits is the number of bits one character takes on the wire: start,
// data, parity and stop bits.
func (m LineMode) CharBits() int {
	n := 1 + m.DataBits + m.StopBits
	if m.Parity != ParityNone && m.Parity != "" {
		n++
	}
	return n
}

// library is the library's line setting for a checked mode.
func (m LineMode) library() *bugst.Mode {
	stop := bugst.OneStopBit
	if m.StopBits == 2 {
		stop = bugst.TwoStopBits
	}
	return &bugst.Mode{BaudRate: m.Baud, DataBits: m.DataBits, Parity: parities[m.Parity], StopBits: stop}
}

func (c Config) lineMode() LineMode {
	return LineMode{Baud: c.Baud, DataBits: c.DataBits, Parity: c.Parity, StopBits: c.StopBits}
}

// mode is the library's line setting for a validated config.
func (c Config) mode() *bugst.Mode { return c.lineMode().library() }

// source is the record source of the port.
func (c Config) source() string { return sourcePrefix + c.Name }

// headers returns the static headers sorted by key, so records are stable.
func (c Config) headers() []wal.Header {
	if len(c.Headers) == 0 {
		return nil
	}
	hs := make([]wal.Header, 0, len(c.Headers))
	for k, v := range c.Headers {
		hs = append(hs, wal.Header{Key: k, Value: v})
	}
	slices.SortFunc(hs, func(a, b wal.Header) int { return strings.Compare(a.Key, b.Key) })
	return hs
}
