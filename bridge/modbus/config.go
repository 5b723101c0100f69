package modbus

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"edgeq/bridge/serial"
	"edgeq/wal"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("invalid modbus config")

// Function is the Modbus table a register is read from.
type Function string

// Tables and the function codes that read them.
const (
	Coils           Function = "coils"    // FC 1, bits
	DiscreteInputs  Function = "discrete" // FC 2, bits
	HoldingRegister Function = "holding"  // FC 3, 16-bit words
	InputRegister   Function = "input"    // FC 4, 16-bit words
)

// code is the function code that reads f.
func (f Function) code() byte {
	switch f {
	case Coils:
		return 1
	case DiscreteInputs:
		return 2
	case HoldingRegister:
		return 3
	case InputRegister:
		return 4
	}
	return 0
}

// bits says whether the table holds bits (coils, discrete inputs).
func (f Function) bits() bool { return f == Coils || f == DiscreteInputs }

// Type is how a register's words become a value.
type Type string

// Value types.
const (
	Bool    Type = "bool"
	Int16   Type = "int16"
	Uint16  Type = "uint16"
	Int32   Type = "int32"
	Uint32  Type = "uint32"
	Int64   Type = "int64"
	Uint64  Type = "uint64"
	Float32 Type = "float32"
	Float64 Type = "float64"
	String  Type = "string"
)

// words is the number of registers a value of t takes; 0 for string (its
// count) and bool.
func (t Type) words() int {
	switch t {
	case Int16, Uint16:
		return 1
	case Int32, Uint32, Float32:
		return 2
	case Int64, Uint64, Float64:
		return 4
	}
	return 0
}

// Order is a byte order (within a register) or word order (across them).
type Order string

// Orders. Modbus itself is big-endian; many devices put the low word of a
// 32-bit value first ("word_order: little", CDAB).
const (
	Big    Order = "big"
	Little Order = "little"
)

// Protocol limits (Modbus application protocol v1.1b3, 6.1–6.4).
const (
	MaxReadRegisters = 125
	MaxReadBits      = 2000
)

// Limits of the configuration, so that a typo cannot make a table unbounded.
const (
	MaxBuses          = 32
	MaxDevicesPerBus  = 247
	MaxRegisters      = 1024 // per device
	maxNameLen        = 64
	maxBusNameLen     = wal.MaxSourceLen - len(sourcePrefix)
	maxUnitLen        = 32
	maxPendingLimit   = 4096
	sourcePrefix      = "modbus:"
	minInterval       = 10 * time.Millisecond
	maxInterval       = 24 * time.Hour
	maxTimeout        = 30 * time.Second
	maxRetries        = 10
	defaultMaxPending = 64
)

// Config is one bus: an RTU serial line or a Modbus TCP connection (a device
// or a gateway with unit IDs behind it), and the devices polled on it.
type Config struct {
	// Name identifies the bus in logs, metrics and the record source
	// ("modbus:<name>"). Required, [A-Za-z0-9_.-].
	Name string `yaml:"name"`
	// RTU or TCP: exactly one.
	RTU *RTU `yaml:"rtu"`
	TCP *TCP `yaml:"tcp"`
	// Timeout is the response timeout of one request (default 500ms), counted
	// from the end of the request on the wire.
	Timeout time.Duration `yaml:"timeout"`
	// Retries of a failed poll (timeout, CRC error, busy), each after a
	// backoff during which the other devices are polled (default 2).
	Retries int `yaml:"retries"`
	// RetryBackoff is the first retry's wait, doubled each retry (default 100ms).
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// MaxBackoff bounds how far apart the polls of a device that keeps
	// failing are spaced (default 30s; never below its interval).
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// ReopenMin and ReopenMax bound the backoff between attempts to open the
	// serial port or connect (defaults 100ms and 5s).
	ReopenMin time.Duration `yaml:"reopen_min"`
	ReopenMax time.Duration `yaml:"reopen_max"`
	// MaxPending bounds the records being stored; polling waits beyond it
	// (default 64).
	MaxPending int `yaml:"max_pending"`
	// Devices polled on the bus.
	Devices []Device `yaml:"devices"`
}

// RTU is a Modbus RTU serial line (RS-485).
type RTU struct {
	// Path of the device node; prefer /dev/serial/by-id/.... Required.
	Path string `yaml:"path"`
	// Baud (default 9600), data bits (8), parity (even, the spec's default),
	// stop bits (1).
	Baud     int           `yaml:"baud"`
	DataBits int           `yaml:"data_bits"`
	Parity   serial.Parity `yaml:"parity"`
	StopBits int           `yaml:"stop_bits"`
	// FrameGap is the silence before a request and that ends a garbled
	// response. Default: 3.5 character times, 1.75ms above 19200 baud (the
	// spec's t3.5).
	FrameGap time.Duration `yaml:"frame_gap"`
}

// TCP is a Modbus TCP server or gateway.
type TCP struct {
	// Address is host:port. Required.
	Address string `yaml:"address"`
}

// Device is one slave: a unit ID on the bus, stored as one edgeq device.
type Device struct {
	// Unit is the slave's unit ID: 1..247 on RTU, 0..255 on TCP.
	Unit int `yaml:"unit"`
	// Device is the edgeq device ID of its records. Required.
	Device string `yaml:"device"`
	// Interval between polls (default 1s); a register may poll less often.
	Interval time.Duration `yaml:"interval"`
	// OnChange stores a poll only when a value moved by more than its
	// deadband, or the quality changed (and at least every Heartbeat).
	OnChange bool `yaml:"on_change"`
	// Heartbeat, with on_change, stores a poll at least this often even when
	// nothing changed (default 0: never).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// MaxRegisters is the most registers (or 16×, bits) one request reads;
	// some devices accept fewer than the spec's 125 (default 125).
	MaxRegisters int `yaml:"max_registers"`
	// MaxGap lets one request span up to this many unmapped registers
	// between two mapped ones (default 0: only adjacent ones are merged;
	// reading unmapped registers makes some devices answer with an
	// exception).
	MaxGap int `yaml:"max_gap"`
	// Registers read from the device; their names are the record's keys.
	Registers []Register `yaml:"registers"`
}

// Register is one named value.
type Register struct {
	// Name is its key in the record (not ts, quality or errors).
	Name     string   `yaml:"name"`
	Function Function `yaml:"function"`
	// Address is the 0-based protocol address (register 40001 is holding 0).
	Address int  `yaml:"address"`
	Type    Type `yaml:"type"`
	// Count of registers of a string (2 characters each), or of bits of a
	// bool array; other types know their size. Default 1.
	Count int `yaml:"count"`
	// ByteOrder within a register and WordOrder across registers, big
	// (default) or little.
	ByteOrder Order `yaml:"byte_order"`
	WordOrder Order `yaml:"word_order"`
	// Scale and Offset make value = raw*scale + offset (a number). Scale 0
	// means 1.
	Scale  float64 `yaml:"scale"`
	Offset float64 `yaml:"offset"`
	// Unit is documentation, shown by edgeq modbus read.
	Unit string `yaml:"unit"`
	// Deadband, with the device's on_change, is the change that counts.
	Deadband float64 `yaml:"deadband"`
	// Interval polls this register less often than the device (a multiple
	// of nothing in particular; default the device's).
	Interval time.Duration `yaml:"interval"`
}

// DefaultConfig returns the bus defaults; Name and transport are empty.
func DefaultConfig() Config {
	return Config{
		Timeout:      500 * time.Millisecond,
		Retries:      2,
		RetryBackoff: 100 * time.Millisecond,
		MaxBackoff:   30 * time.Second,
		ReopenMin:    100 * time.Millisecond,
		ReopenMax:    5 * time.Second,
		MaxPending:   defaultMaxPending,
	}
}

// WithDefaults fills zero fields from DefaultConfig and the RTU, device and
// register defaults. Retries stays as given (0 is valid); the node decodes
// over DefaultConfig, so a missing retries key keeps 2.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&c.Timeout, d.Timeout)
	setDur(&c.RetryBackoff, d.RetryBackoff)
	setDur(&c.MaxBackoff, d.MaxBackoff)
	setDur(&c.ReopenMin, d.ReopenMin)
	setDur(&c.ReopenMax, d.ReopenMax)
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	if c.RTU != nil {
		r := *c.RTU
		if r.Baud == 0 {
			r.Baud = 9600
		}
		if r.DataBits == 0 {
			r.DataBits = 8
		}
		if r.Parity == "" {
			r.Parity = serial.ParityEven
		}
		if r.StopBits == 0 {
			r.StopBits = 1
		}
		c.RTU = &r
	}
	devs := make([]Device, len(c.Devices))
	for i, dv := range c.Devices {
		if dv.Interval == 0 {
			dv.Interval = time.Second
		}
		if dv.MaxRegisters == 0 {
			dv.MaxRegisters = MaxReadRegisters
		}
		regs := make([]Register, len(dv.Registers))
		for j, r := range dv.Registers {
			if r.ByteOrder == "" {
				r.ByteOrder = Big
			}
			if r.WordOrder == "" {
				r.WordOrder = Big
			}
			if r.Count == 0 {
				r.Count = 1
			}
			if r.Scale == 0 {
				r.Scale = 1
			}
			if r.Interval == 0 {
				r.Interval = dv.Interval
			}
			if r.Type == "" && r.Function.bits() {
				r.Type = Bool
			}
			regs[j] = r
		}
		dv.Registers = regs
		devs[i] = dv
	}
	c.Devices = devs
	return c
}

// mode is the serial line of an RTU bus.
func (r *RTU) mode() serial.LineMode {
	return serial.LineMode{Baud: r.Baud, DataBits: r.DataBits, Parity: r.Parity, StopBits: r.StopBits}
}

// charTime is how long one character takes on the line.
func (r *RTU) charTime() time.Duration {
	return time.Duration(r.mode().CharBits()) * time.Second / time.Duration(r.Baud)
}

// frameGap is the configured gap or the spec's t3.5.
func (r *RTU) frameGap() time.Duration {
	if r.FrameGap > 0 {
		return r.FrameGap
	}
	if r.Baud > 19200 {
		return 1750 * time.Microsecond
	}
	return r.charTime() * 35 / 10
}

// Validate reports every value out of range, each named by its key, such as
// modbus[plant].devices[0].registers[2].count.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: modbus[%s].%s: %s", ErrInvalidConfig, c.Name, key, fmt.Sprintf(format, args...)))
	}
	if err := validateName(c.Name, maxBusNameLen); err != nil {
		bad("name", "%q: %v", c.Name, err)
	}
	switch {
	case c.RTU != nil && c.TCP != nil:
		bad("rtu", "a bus is rtu or tcp, not both")
	case c.RTU != nil:
		r := c.RTU
		if r.Path == "" || !filepath.IsAbs(r.Path) {
			bad("rtu.path", "%q, want an absolute path", r.Path)
		}
		r.mode().Check(func(key, format string, args ...any) { bad("rtu."+key, format, args...) })
		if r.FrameGap < 0 || r.FrameGap > time.Second {
			bad("rtu.frame_gap", "%v, want 0..1s", r.FrameGap)
		}
	case c.TCP != nil:
		host, port, err := net.SplitHostPort(c.TCP.Address)
		if err != nil || host == "" {
			bad("tcp.address", "%q, want host:port", c.TCP.Address)
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			bad("tcp.address", "%q: port must be 1..65535", c.TCP.Address)
		}
	default:
		bad("rtu", "a bus needs rtu (a serial path) or tcp (an address)")
	}
	if c.Timeout < time.Millisecond || c.Timeout > maxTimeout {
		bad("timeout", "%v, want 1ms..%v", c.Timeout, maxTimeout)
	}
	if c.Retries < 0 || c.Retries > maxRetries {
		bad("retries", "%d, want 0..%d", c.Retries, maxRetries)
	}
	if c.RetryBackoff <= 0 || c.RetryBackoff > time.Minute {
		bad("retry_backoff", "%v, want > 0 and <= 1m", c.RetryBackoff)
	}
	if c.MaxBackoff < c.RetryBackoff || c.MaxBackoff > time.Hour {
		bad("max_backoff", "%v, want retry_backoff..1h", c.MaxBackoff)
	}
	if c.ReopenMin <= 0 || c.ReopenMin > time.Minute {
		bad("reopen_min", "%v, want > 0 and <= 1m", c.ReopenMin)
	}
	if c.ReopenMax < c.ReopenMin || c.ReopenMax > 10*time.Minute {
		bad("reopen_max", "%v, want reopen_min..10m", c.ReopenMax)
	}
	if c.MaxPending < 1 || c.MaxPending > maxPendingLimit {
		bad("max_pending", "%d, want 1..%d", c.MaxPending, maxPendingLimit)
	}
	if len(c.Devices) == 0 {
		bad("devices", "empty, a bus polls at least one device")
	}
	if len(c.Devices) > MaxDevicesPerBus {
		bad("devices", "%d devices, at most %d", len(c.Devices), MaxDevicesPerBus)
	}
	units := map[int]int{}
	for i, d := range c.Devices {
		key := fmt.Sprintf("devices[%d]", i)
		minUnit, maxUnit := 0, 255
		if c.RTU != nil {
			minUnit, maxUnit = 1, 247 // 0 is broadcast: nobody answers it
		}
		if d.Unit < minUnit || d.Unit > maxUnit {
			bad(key+".unit", "%d, want %d..%d", d.Unit, minUnit, maxUnit)
		}
		if j, dup := units[d.Unit]; dup {
			bad(key+".unit", "%d is also devices[%d]", d.Unit, j)
		}
		units[d.Unit] = i
		validateDevice(d, key, bad)
	}
	return errors.Join(errs...)
}

func validateDevice(d Device, key string, bad func(key, format string, args ...any)) {
	if err := wal.ValidateDeviceID(d.Device); err != nil {
		bad(key+".device", "%q: %v", d.Device, err)
	}
	if d.Interval < minInterval || d.Interval > maxInterval {
		bad(key+".interval", "%v, want %v..%v", d.Interval, minInterval, maxInterval)
	}
	if d.Heartbeat < 0 || d.Heartbeat > maxInterval {
		bad(key+".heartbeat", "%v, want 0..%v", d.Heartbeat, maxInterval)
	}
	if d.MaxRegisters < 1 || d.MaxRegisters > MaxReadRegisters {
		bad(key+".max_registers", "%d, want 1..%d", d.MaxRegisters, MaxReadRegisters)
	}
	if d.MaxGap < 0 || d.MaxGap > MaxReadRegisters {
		bad(key+".max_gap", "%d, want 0..%d", d.MaxGap, MaxReadRegisters)
	}
	if len(d.Registers) == 0 {
		bad(key+".registers", "empty")
	}
	if len(d.Registers) > MaxRegisters {
		bad(key+".registers", "%d registers, at most %d", len(d.Registers), MaxRegisters)
	}
	names := map[string]int{}
	for j, r := range d.Registers {
		rk := fmt.Sprintf("%s.registers[%d]", key, j)
		if err := validateName(r.Name, maxNameLen); err != nil {
			bad(rk+".name", "%q: %v", r.Name, err)
		} else if slices.Contains(reservedKeys, r.Name) {
			bad(rk+".name", "%q is a key of the record itself", r.Name)
		}
		if k, dup := names[r.Name]; dup && r.Name != "" {
			bad(rk+".name", "%q is also registers[%d]", r.Name, k)
		}
		names[r.Name] = j
		validateRegister(r, d, rk, bad)
	}
	validateOverlaps(d.Registers, key, bad)
}

// reservedKeys are the record's own keys.
var reservedKeys = []string{"ts", "quality", "errors"}

func validateRegister(r Register, d Device, rk string, bad func(key, format string, args ...any)) {
	if r.Function.code() == 0 {
		bad(rk+".function", "%q, want coils, discrete, holding or input", r.Function)
		return
	}
	switch r.Type {
	case Bool, Int16, Uint16, Int32, Uint32, Int64, Uint64, Float32, Float64, String:
	default:
		bad(rk+".type", "%q, want bool, int16, uint16, int32, uint32, int64, uint64, float32, float64 or string", r.Type)
		return
	}
	if r.Function.bits() && r.Type != Bool {
		bad(rk+".type", "%q: coils and discrete inputs are bits, want bool", r.Type)
	}
	if r.Address < 0 || r.Address > math.MaxUint16 {
		bad(rk+".address", "%d, want 0..65535", r.Address)
	}
	size := r.size()
	limit := min(d.MaxRegisters, MaxReadRegisters)
	if r.Function.bits() {
		limit = MaxReadBits
	}
	switch {
	case r.Count < 1:
		bad(rk+".count", "%d, want >= 1", r.Count)
	case r.Type != String && r.Type != Bool && r.Count != 1:
		bad(rk+".count", "%d: a %s has a fixed size, leave count out", r.Count, r.Type)
	case r.Type == Bool && !r.Function.bits() && r.Count != 1:
		bad(rk+".count", "%d: a bool register is one register", r.Count)
	case size > limit:
		bad(rk+".count", "%d %s in one read, at most %d", size, unitWord(r.Function), limit)
	}
	if r.Address+size-1 > math.MaxUint16 {
		bad(rk+".address", "%d + %d %s runs past 65535", r.Address, size, unitWord(r.Function))
	}
	if r.ByteOrder != Big && r.ByteOrder != Little {
		bad(rk+".byte_order", "%q, want big or little", r.ByteOrder)
	}
	if r.WordOrder != Big && r.WordOrder != Little {
		bad(rk+".word_order", "%q, want big or little", r.WordOrder)
	}
	if math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0) || r.Scale == 0 {
		bad(rk+".scale", "%v, want a finite non-zero number", r.Scale)
	}
	if math.IsNaN(r.Offset) || math.IsInf(r.Offset, 0) {
		bad(rk+".offset", "%v, want a finite number", r.Offset)
	}
	if (r.Scale != 1 || r.Offset != 0) && (r.Type == String || r.Type == Bool) {
		bad(rk+".scale", "a %s is not scaled", r.Type)
	}
	if math.IsNaN(r.Deadband) || r.Deadband < 0 {
		bad(rk+".deadband", "%v, want >= 0", r.Deadband)
	}
	if len(r.Unit) > maxUnitLen {
		bad(rk+".unit", "%d bytes, at most %d", len(r.Unit), maxUnitLen)
	}
	if r.Interval < d.Interval || r.Interval > maxInterval {
		bad(rk+".interval", "%v, want the device's interval (%v)..%v", r.Interval, d.Interval, maxInterval)
	}
}

// size is the number of registers (or bits) r reads.
func (r Register) size() int {
	if w := r.Type.words(); w > 0 {
		return w
	}
	return max(r.Count, 1)
}

func unitWord(f Function) string {
	if f.bits() {
		return "bits"
	}
	return "registers"
}

// validateOverlaps refuses two registers of one table that share an
// address: one of them is almost certainly a typo.
func validateOverlaps(regs []Register, key string, bad func(key, format string, args ...any)) {
	idx := make([]int, 0, len(regs))
	for i, r := range regs {
		if r.Function.code() != 0 && r.Count >= 1 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int {
		ra, rb := regs[a], regs[b]
		if ra.Function != rb.Function {
			return int(ra.Function.code()) - int(rb.Function.code())
		}
		return ra.Address - rb.Address
	})
	for k := 1; k < len(idx); k++ {
		p, r := regs[idx[k-1]], regs[idx[k]]
		if p.Function == r.Function && r.Address < p.Address+p.size() {
			bad(fmt.Sprintf("%s.registers[%d].address", key, idx[k]), "%s %d overlaps registers[%d] (%q, %d..%d)",
				r.Function, r.Address, idx[k-1], p.Name, p.Address, p.Address+p.size()-1)
		}
	}
}

func validateName(name string, maxLen int) error {
	if name == "" || len(name) > maxLen {
		return fmt.Errorf("want 1..%d bytes", maxLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("byte %d is not one of [A-Za-z0-9_.-]", i)
		}
	}
	return nil
}

// source is the record source of the bus.
func (c Config) source() string { return sourcePrefix + c.Name }
