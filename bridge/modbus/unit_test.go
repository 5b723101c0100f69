package modbus

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCRC16(t *testing.T) {
	// The spec's example (Modbus over serial line, 6.2.2): 02 07 → 41 12.
	if got := crc16([]byte{0x02, 0x07}); got != 0x1241 {
		t.Errorf("crc16(02 07) = %04x, want 1241", got)
	}
	f := appendRTU(nil, request{unit: 1, fn: 3, addr: 0, qty: 10})
	if want := []byte{1, 3, 0, 0, 0, 10, 0xc5, 0xcd}; string(f) != string(want) {
		t.Errorf("frame % x, want % x", f, want)
	}
}

func validDevice(regs ...Register) Config {
	c := DefaultConfig()
	c.Name = "b"
	c.TCP = &TCP{Address: "127.0.0.1:502"}
	c.Devices = []Device{{Unit: 1, Device: "d", Registers: regs}}
	return c.WithDefaults()
}

func TestValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"overlap", validDevice(
			Register{Name: "a", Function: HoldingRegister, Address: 10, Type: Float32},
			Register{Name: "b", Function: HoldingRegister, Address: 11, Type: Uint16}),
			`modbus[b].devices[0].registers[1].address: holding 11 overlaps registers[0] ("a", 10..11)`},
		{"count over 125", validDevice(Register{Name: "s", Function: InputRegister, Address: 0, Type: String, Count: 126}),
			"modbus[b].devices[0].registers[0].count: 126 registers in one read, at most 125"},
		{"bits over 2000", validDevice(Register{Name: "c", Function: Coils, Address: 0, Count: 2001}),
			"modbus[b].devices[0].registers[0].count: 2001 bits in one read, at most 2000"},
		{"unknown type", validDevice(Register{Name: "x", Function: HoldingRegister, Type: "int12"}),
			`modbus[b].devices[0].registers[0].type: "int12", want bool`},
		{"unknown function", validDevice(Register{Name: "x", Function: "holdings", Type: Uint16}),
			`modbus[b].devices[0].registers[0].function: "holdings"`},
		{"reserved name", validDevice(Register{Name: "quality", Function: HoldingRegister, Type: Uint16}),
			"modbus[b].devices[0].registers[0].name: \"quality\" is a key of the record itself"},
		{"past 65535", validDevice(Register{Name: "x", Function: HoldingRegister, Address: 65535, Type: Uint32}),
			"registers[0].address: 65535 + 2 registers runs past 65535"},
		{"coil typed", validDevice(Register{Name: "x", Function: Coils, Type: Uint16}),
			"registers[0].type: \"uint16\": coils and discrete inputs are bits"},
		{"no transport", func() Config {
			c := validDevice(Register{Name: "x", Function: HoldingRegister, Type: Uint16})
			c.TCP = nil
			return c
		}(),
			"modbus[b].rtu: a bus needs rtu"},
		{"rtu unit 0", func() Config {
			c := validDevice(Register{Name: "x", Function: HoldingRegister, Type: Uint16})
			c.TCP, c.RTU, c.Devices[0].Unit = nil, &RTU{Path: "/dev/ttyUSB0", Baud: 9600, DataBits: 8, Parity: "even", StopBits: 1}, 0
			return c
		}(), "modbus[b].devices[0].unit: 0, want 1..247"},
		{"bad parity", func() Config {
			c := validDevice(Register{Name: "x", Function: HoldingRegister, Type: Uint16})
			c.TCP, c.RTU = nil, &RTU{Path: "/dev/ttyUSB0", Baud: 9600, DataBits: 8, Parity: "evn", StopBits: 1}
			return c
		}(), `modbus[b].rtu.parity: "evn"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if err := validDevice(Register{Name: "x", Function: HoldingRegister, Type: Uint16}).Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

func TestPlanMergesWithinTheSpec(t *testing.T) {
	regs := []Register{
		{Name: "a", Function: HoldingRegister, Address: 0, Type: Uint16},
		{Name: "b", Function: HoldingRegister, Address: 1, Type: Float32},   // 1..2
		{Name: "c", Function: HoldingRegister, Address: 5, Type: Uint16},    // gap of 2
		{Name: "d", Function: InputRegister, Address: 3, Type: Int16},       // other table
		{Name: "e", Function: HoldingRegister, Address: 100, Type: Float64}, // far
		{Name: "f", Function: HoldingRegister, Address: 200, Type: String, Count: 100},
		{Name: "g", Function: HoldingRegister, Address: 300, Type: String, Count: 30}, // 200..329 > 125
		{Name: "h", Function: Coils, Address: 0},
		{Name: "i", Function: Coils, Address: 1999},
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	type span struct {
		fn        Function
		addr, qty int
	}
	tests := []struct {
		name         string
		maxRegs, gap int
		want         []span
	}{
		{"adjacent only", 125, 0, []span{{Coils, 0, 1}, {Coils, 1999, 1}, {HoldingRegister, 0, 3}, {HoldingRegister, 5, 1},
			{HoldingRegister, 100, 4}, {HoldingRegister, 200, 100}, {HoldingRegister, 300, 30}, {InputRegister, 3, 1}}},
		{"gap 2", 125, 2, []span{{Coils, 0, 1}, {Coils, 1999, 1}, {HoldingRegister, 0, 6}, {HoldingRegister, 100, 4},
			{HoldingRegister, 200, 100}, {HoldingRegister, 300, 30}, {InputRegister, 3, 1}}},
		{"gap 125", 125, 125, []span{{Coils, 0, 2000}, {HoldingRegister, 0, 104}, {HoldingRegister, 200, 100}, {HoldingRegister, 300, 30}, {InputRegister, 3, 1}}},
		{"device takes 4", 4, 2, []span{{Coils, 0, 1}, {Coils, 1999, 1}, {HoldingRegister, 0, 3}, {HoldingRegister, 5, 1},
			{HoldingRegister, 100, 4}, {HoldingRegister, 200, 100}, {HoldingRegister, 300, 30}, {InputRegister, 3, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reads := plan(regs, all, tt.maxRegs, tt.gap)
			var got []span
			for _, r := range reads {
				got = append(got, span{r.fn, r.addr, r.qty})
				limit := MaxReadRegisters
				if r.fn.bits() {
					limit = MaxReadBits
				}
				if r.qty > limit {
					t.Errorf("read of %d beyond the spec", r.qty)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("plan %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("plan %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func words(ws ...uint16) []byte {
	var b []byte
	for _, w := range ws {
		b = binary.BigEndian.AppendUint16(b, w)
	}
	return b
}

func TestDecodeOrdersAndScale(t *testing.T) {
	f32 := math.Float32bits(230.5) // 0x43668000
	hi, lo := uint16(f32>>16), uint16(f32)
	swap := func(w uint16) uint16 { return w<<8 | w>>8 }
	tests := []struct {
		name string
		reg  Register
		data []byte
		want string
	}{
		{"ABCD", Register{Type: Float32}, words(hi, lo), "230.5"},
		{"CDAB", Register{Type: Float32, WordOrder: Little}, words(lo, hi), "230.5"},
		{"BADC", Register{Type: Float32, ByteOrder: Little}, words(swap(hi), swap(lo)), "230.5"},
		{"DCBA", Register{Type: Float32, ByteOrder: Little, WordOrder: Little}, words(swap(lo), swap(hi)), "230.5"},
		{"int16", Register{Type: Int16}, words(0xfb2e), "-1234"},
		{"uint16 scaled", Register{Type: Uint16, Scale: 0.1}, words(2301), "230.1"},
		{"int16 offset", Register{Type: Int16, Scale: 0.5, Offset: -40}, words(100), "10"},
		{"int32 CDAB", Register{Type: Int32, WordOrder: Little}, words(0x7960, 0xfffe), "-100000"},
		{"uint64", Register{Type: Uint64}, words(0xffff, 0xffff, 0xffff, 0xffff), "18446744073709551615"},
		{"float64", Register{Type: Float64}, words(0x4093, 0x4a45, 0x6d5c, 0xfaad), "1234.5678"},
		{"NaN is null", Register{Type: Float32}, words(0x7fc0, 0), "null"},
		{"string", Register{Type: String, Count: 3}, []byte("AB\"\x00\x00\x00"), `"AB\""`},
		{"string swapped", Register{Type: String, Count: 2, ByteOrder: Little}, []byte("BADC"), `"ABCD"`},
		{"bool register", Register{Type: Bool}, words(2), "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.reg
			r.Function, r.Name = HoldingRegister, "x"
			if r.Count == 0 {
				r.Count = 1
			}
			if r.Scale == 0 {
				r.Scale = 1
			}
			if r.ByteOrder == "" {
				r.ByteOrder = Big
			}
			if r.WordOrder == "" {
				r.WordOrder = Big
			}
			v, err := decodeValue(r, 0, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(v.appendJSON(nil)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	// Bits: coil 3..5 of 0b00101000 (LSB first).
	v, err := decodeValue(Register{Name: "c", Function: Coils, Address: 3, Count: 3, Type: Bool}, 0, []byte{0x28})
	if err != nil || string(v.appendJSON(nil)) != "[true,false,true]" {
		t.Errorf("bits: %s %v", v.appendJSON(nil), err)
	}
}

func TestParseResponses(t *testing.T) {
	q := request{unit: 5, fn: 3, addr: 0, qty: 2}
	good := appendRTUResponse(5, 3, words(1, 2))
	if data, err := parseRTU(q, good); err != nil || string(data) != string(words(1, 2)) {
		t.Fatalf("good: % x %v", data, err)
	}
	bad := append([]byte(nil), good...)
	bad[4] ^= 1
	if _, err := parseRTU(q, bad); !errors.Is(err, ErrCRC) {
		t.Errorf("flipped bit: %v, want crc", err)
	}
	other := appendRTUResponse(6, 3, words(1, 2))
	if _, err := parseRTU(q, other); !errors.Is(err, ErrGarbled) {
		t.Errorf("other unit: %v, want garbled", err)
	}
	ex := []byte{5, 0x83, 2}
	ex = binary.LittleEndian.AppendUint16(ex, crc16(ex))
	var exErr *ExceptionError
	if _, err := parseRTU(q, ex); !errors.As(err, &exErr) || exErr.Code != 2 || exErr.retryable() {
		t.Errorf("exception: %v", err)
	}
	if n, err := rtuFrameLen(q, good[:3]); err != nil || n != len(good) {
		t.Errorf("frame len %d %v", n, err)
	}
	tx, unit, n, err := parseMBAP([]byte{0, 7, 0, 0, 0, 7, 5})
	if err != nil || tx != 7 || unit != 5 || n != 6 {
		t.Errorf("mbap %d %d %d %v", tx, unit, n, err)
	}
	if _, _, _, err := parseMBAP([]byte{0, 7, 0, 1, 0, 7, 5}); !errors.Is(err, ErrGarbled) {
		t.Errorf("protocol 1: %v", err)
	}
}

// appendRTUResponse builds a slave's answer, for tests and the fuzz corpus.
func appendRTUResponse(unit, fn byte, data []byte) []byte {
	f := []byte{unit, fn, byte(len(data))}
	f = append(f, data...)
	return binary.LittleEndian.AppendUint16(f, crc16(f))
}

func TestScheduleRetriesAndBackoff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := Device{Interval: time.Second, Registers: []Register{
		{Name: "fast", Interval: time.Second}, {Name: "slow", Interval: 10 * time.Second}, {Name: "fast2", Interval: time.Second}}}
	s := newSched(d, t0)
	groups, regs := s.due(t0)
	if len(groups) != 2 || len(regs) != 3 {
		t.Fatalf("first poll: groups %v regs %v", groups, regs)
	}
	s.done(groups, t0.Add(10*time.Millisecond), true, 30*time.Second)
	if w := s.wake(); !w.Equal(t0.Add(time.Second)) {
		t.Errorf("wake %v, want t0+1s", w.Sub(t0))
	}
	groups, regs = s.due(t0.Add(time.Second))
	if len(groups) != 1 || len(regs) != 2 {
		t.Errorf("second poll: %v %v, want the fast group only", groups, regs)
	}
	// Failing polls back off: 1s, 2s, 4s ... capped at 30s.
	one := newSched(Device{Interval: time.Second, Registers: []Register{{Name: "a", Interval: time.Second}}}, t0)
	now := t0
	var waits []time.Duration
	for range 8 {
		g, _ := one.due(now)
		one.done(g, now, false, 30*time.Second)
		w := one.wake()
		waits = append(waits, w.Sub(now))
		now = w
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v s", waits, want)
		}
	}
	g, _ := one.due(now)
	one.done(g, now, true, 30*time.Second)
	if w := one.wake().Sub(now); w != time.Second {
		t.Errorf("after an answer the interval is back: %v", w)
	}
	s.retryAt = now.Add(50 * time.Millisecond)
	if !s.wake().Equal(s.retryAt) {
		t.Error("a pending retry is the wake time")
	}
}

func TestOnChangeDeadband(t *testing.T) {
	regs := []Register{{Name: "t", Function: HoldingRegister, Type: Int16, Scale: 0.1, Deadband: 0.5, Interval: time.Second},
		{Name: "on", Function: Coils, Type: Bool, Count: 1, Interval: time.Second}}
	d := newDevice(Device{Unit: 1, Device: "x", Interval: time.Second, OnChange: true, Heartbeat: time.Minute, Registers: regs, MaxRegisters: 125}, 0, time.Unix(0, 0))
	poll := func(at int, temp int16, on bool) bool {
		p := d.begin(time.Unix(int64(at), 0))
		p.decode(d, p.reads[0], []byte{boolByte(on)})
		p.decode(d, p.reads[1], words(uint16(temp)))
		store := d.shouldStore(p)
		if store {
			var m map[string]any
			if err := json.Unmarshal(d.appendRecord(nil, p), &m); err != nil {
				t.Fatal(err)
			}
			d.remember(p)
		}
		d.sched.done(p.groups, p.start, true, time.Minute)
		return store
	}
	steps := []struct {
		at   int
		temp int16
		on   bool
		want bool
	}{
		{0, 200, false, true},  // first
		{1, 204, false, false}, // 0.4 < deadband
		{2, 206, false, true},  // 0.6 from the stored 20.0
		{3, 208, false, false},
		{4, 208, true, true},  // a bool changed
		{64, 208, true, true}, // heartbeat
	}
	for _, s := range steps {
		if got := poll(s.at, s.temp, s.on); got != s.want {
			t.Fatalf("at %ds temp %d on %v: stored %v, want %v", s.at, s.temp, s.on, got, s.want)
		}
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

var testEpoch = time.Unix(1_700_000_000, 0)
