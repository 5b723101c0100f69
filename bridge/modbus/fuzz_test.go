package modbus

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeResponse feeds arbitrary bytes as the RTU response to a read of
// fn/qty and, when the frame is accepted, decodes every register of a map
// covering the read. It must never panic; an accepted frame has the data
// length the request asked for, and every record it makes is valid JSON.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(byte(3), uint16(4), appendRTUResponse(1, 3, words(0x4366, 0x8000, 0xfb2e, 0x0001)))
	f.Add(byte(4), uint16(2), appendRTUResponse(1, 4, words(0x7fc0, 0)))
	f.Add(byte(1), uint16(10), appendRTUResponse(1, 1, []byte{0x8d, 0x03}))
	f.Add(byte(2), uint16(3), appendRTUResponse(1, 2, []byte{0x06}))
	f.Add(byte(3), uint16(1), []byte{1, 0x83, 2, 0xc0, 0xf1})
	f.Add(byte(3), uint16(2), []byte{1, 3, 4, 0, 1})
	f.Fuzz(func(t *testing.T, fn byte, qty uint16, frame []byte) {
		fn = fn%4 + 1
		bits := fn <= 2
		if bits {
			qty = qty%MaxReadBits + 1
		} else {
			qty = qty%MaxReadRegisters + 1
		}
		q := request{unit: 1, fn: fn, addr: 0, qty: qty}
		if n, err := rtuFrameLen(q, frame); err == nil && (n < 5 || n > maxRTUFrame) {
			t.Fatalf("frame length %d", n)
		}
		data, err := parseRTU(q, frame)
		if err != nil {
			var ex *ExceptionError
			if !errors.Is(err, ErrCRC) && !errors.Is(err, ErrGarbled) && !errors.As(err, &ex) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		if len(data) != q.dataLen() {
			t.Fatalf("%d data bytes for %d", len(data), q.dataLen())
		}
		fnName := map[byte]Function{1: Coils, 2: DiscreteInputs, 3: HoldingRegister, 4: InputRegister}[fn]
		var regs []Register
		if bits {
			regs = []Register{{Name: "b", Function: fnName, Type: Bool, Count: int(qty)}}
		} else {
			types := []Type{Uint16, Int16, Float32, Int32, Uint32, Float64, Int64, Uint64, String, Bool}
			for a, i := 0, 0; a < int(qty); i++ {
				ty := types[i%len(types)]
				r := Register{Name: string(rune('a'+i%26)) + string(rune('a'+i/26)), Function: fnName, Address: a, Type: ty,
					Count: 1, Scale: 1, ByteOrder: Big, WordOrder: Little}
				if ty == String {
					r.Count = min(3, int(qty)-a)
				}
				if r.size() > int(qty)-a {
					r.Type, r.Count = Uint16, 1
				}
				if i%3 == 0 && ty != String && ty != Bool {
					r.Scale, r.ByteOrder = 0.1, Little
				}
				regs = append(regs, r)
				a += r.size()
			}
		}
		d := newDevice(Device{Unit: 1, Device: "fz", Registers: regs, MaxRegisters: MaxReadRegisters}, 0, testEpoch)
		p := d.begin(testEpoch)
		if len(p.reads) != 1 || p.reads[0].qty != int(qty) {
			t.Fatalf("plan %+v for %d", p.reads, qty)
		}
		p.decode(d, p.reads[0], data)
		if p.failed > 0 {
			t.Fatalf("a register failed on a full read: %v", p.errs)
		}
		rec := d.appendRecord(nil, p)
		if !json.Valid(rec) {
			t.Fatalf("invalid JSON record %s", rec)
		}
	})
}
