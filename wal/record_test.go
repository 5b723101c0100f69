package wal

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		{Kind: KindData, Device: "d", Seq: 1, Time: 1, Payload: nil},
		{Kind: KindData, Device: "sensor-1", Seq: 42, Time: 1_700_000_000_123_456_789, Source: "mqtt:plant", Payload: []byte(`{"t":21.5}`)},
		{Kind: KindData, Device: "a:b@c_d-e", Seq: math.MaxUint64, Time: -5, Source: "nats",
			Headers: []Header{{"Content-Type", "application/json"}, {"X-Empty", ""}}, Payload: bytes.Repeat([]byte{0, 0xff}, 300),
			MoveRef: Ref{Partition: 9, Offset: 1 << 40}},
		{Kind: KindMove, Device: strings.Repeat("x", MaxDeviceIDLen), Seq: 7, Time: 3, MoveTarget: 8, Payload: []byte{1}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := AppendRecord(nil, &r)
		if len(b) != EncodedLen(&r) {
			t.Fatalf("EncodedLen %d, encoded %d", EncodedLen(&r), len(b))
		}
		var got Record
		if err := DecodeRecord(b, &got); err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		if len(got.Payload) == 0 {
			got.Payload = r.Payload
		}
		if len(got.Headers) == 0 {
			got.Headers = r.Headers
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
		// Every single-bit flip is caught by the CRC or the field checks.
		for i := range b {
			for bit := 0; bit < 8; bit++ {
				c := bytes.Clone(b)
				c[i] ^= 1 << bit
				if DecodeRecord(c, &got) == nil {
					t.Fatalf("flip of byte %d bit %d not detected", i, bit)
				}
			}
		}
		// Every truncation fails.
		for n := 0; n < len(b); n++ {
			if DecodeRecord(b[:n], &got) == nil {
				t.Fatalf("truncation to %d bytes decoded", n)
			}
		}
	}
}

func TestValidateDeviceID(t *testing.T) {
	good := []string{"a", "Z9", "sensor_1", "plant:line-3@site", strings.Repeat("a", 128)}
	bad := []string{"", " ", "a b", "a/b", "a.b", "é", "a\x00", "a*", "a>", strings.Repeat("a", 129), "tab\t"}
	for _, id := range good {
		if err := ValidateDeviceID(id); err != nil {
			t.Errorf("%q rejected: %v", id, err)
		}
	}
	for _, id := range bad {
		err := ValidateDeviceID(id)
		if !errors.Is(err, ErrBadDeviceID) {
			t.Errorf("%q accepted (%v)", id, err)
		}
	}
}

func TestDecodeAllocations(t *testing.T) {
	r := sampleRecords()[1]
	b := AppendRecord(nil, &r)
	var got Record
	if n := testing.AllocsPerRun(100, func() { _ = DecodeRecord(b, &got) }); n != 0 {
		t.Fatalf("decode allocates %v times", n)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(AppendRecord(nil, &r))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if err := DecodeRecord(b, &r); err != nil {
			return
		}
		// What decodes re-encodes to the same bytes (canonical encoding).
		again := AppendRecord(nil, &r)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}

// FuzzRepairTail: whatever the last segment holds, repair leaves a file made of
// complete frames, never panics and never grows the file.
func FuzzRepairTail(f *testing.F) {
	good := []byte{}
	for _, r := range sampleRecords() {
		rec := AppendRecord(nil, &r)
		good = append(good, byte(len(rec)), byte(len(rec)>>7))
		good = append(good, rec...)
	}
	f.Add(good, uint64(math.MaxUint64))
	f.Add([]byte{0, 0, 0, 5, 'h', 'e'}, uint64(2))
	f.Add([]byte{0xff, 0xff, 0xff}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, keep uint64) {
		dir := t.TempDir()
		p := filepath.Join(dir, "00000000000000000001")
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
		res, err := repairDir(dir, keep)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(p)
		if len(after) > len(data) || !bytes.Equal(after, data[:len(after)]) {
			t.Fatal("repair changed more than the tail")
		}
		n, end := scanFrames(after, math.MaxUint64, nil)
		if end != len(after) {
			t.Fatalf("repaired file still has %d torn bytes", len(after)-end)
		}
		if keep != math.MaxUint64 && n > keep {
			t.Fatalf("kept %d frames, limit %d", n, keep)
		}
		if res.Last != n {
			t.Fatalf("reported last %d, file has %d frames", res.Last, n)
		}
	})
}
