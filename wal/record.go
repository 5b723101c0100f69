package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record layout (version 1), all integers little-endian or unsigned varints:
//
//	[0]     version (1)
//	[1]     kind (1 data, 2 move marker)
//	[2:6]   CRC32C (Castagnoli) of bytes [6:]
//	uvarint len + device ID
//	uvarint per-device sequence
//	8 bytes ingest time, unix ns
//	uvarint len + source
//	uvarint move-ref partition+1 (0 = none), then uvarint move-ref offset if present
//	uvarint move target partition (markers only)
//	uvarint header count, then per header: uvarint len + key, uvarint len + value
//	payload: the rest of the record
//
// The CRC sits inside every record because tidwall/wal frames carry no checksum:
// a zero-filled or garbage tail can parse as frames (GOTCHAS 1.1).
const (
	recordVersion   = 1
	recordHeaderLen = 6

	// MaxDeviceIDLen is the longest accepted device ID in bytes.
	MaxDeviceIDLen = 128
	// MaxHeaders is the most headers one record may carry.
	MaxHeaders = 64
	// MaxSourceLen bounds the source label ("mqtt:plant1", "nats", ...).
	MaxSourceLen = 64
)

// Kind says what a record is.
type Kind uint8

const (
	// KindData is a telemetry message.
	KindData Kind = 1
	// KindMove is a move marker: the device's following records live in MoveTarget.
	KindMove Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindMove:
		return "move"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header is one key/value pair carried with a record.
type Header struct {
	Key, Value string
}

// Ref points at one record: a partition and an offset in it. Offset 0 means none.
type Ref struct {
	Partition int
	Offset    uint64
}

// IsZero reports whether r points nowhere.
func (r Ref) IsZero() bool { return r.Offset == 0 }

// Record is one entry of a partition. Decoded records reference the buffer they
// were decoded from; copy what must outlive it.
type Record struct {
	Kind    Kind
	Device  string
	Seq     uint64
	Time    int64 // ingest time, unix ns
	Source  string
	Headers []Header
	Payload []byte
	// MoveRef is set on data records written after a move: the marker that must be
	// passed in MoveRef.Partition before this record may be delivered.
	MoveRef Ref
	// MoveTarget is the partition a move marker sends the device to.
	MoveTarget int
	// NoWait is not stored: it tells Append that nobody waits for this
	// record's durability (a serial line, a Modbus poll, a fire-and-forget
	// publish). Its callback comes once it is written to the OS, and it is
	// fsynced with the next commit round, at the latest after lazy_sync.
	NoWait bool
}

// Errors returned by the codec and by device ID validation.
var (
	ErrBadDeviceID = errors.New("invalid device ID")
	ErrCorrupt     = errors.New("corrupt record")
	ErrTooLarge    = errors.New("record too large")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ValidateDeviceID checks a device ID: 1–128 bytes of [A-Za-z0-9_:@-].
func ValidateDeviceID(id string) error {
	if len(id) == 0 {
		return fmt.Errorf("%w: empty", ErrBadDeviceID)
	}
	if len(id) > MaxDeviceIDLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadDeviceID, len(id), MaxDeviceIDLen)
	}
	for i := 0; i < len(id); i++ {
		if !deviceByte(id[i]) {
			return fmt.Errorf("%w: byte %d (%q) is not one of [A-Za-z0-9_:@-]", ErrBadDeviceID, i, id[i])
		}
	}
	return nil
}

func deviceByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == ':' || c == '@' || c == '-'
}

// EncodedLen is the exact number of bytes AppendRecord adds for r.
func EncodedLen(r *Record) int {
	n := recordHeaderLen
	n += uvarintLen(uint64(len(r.Device))) + len(r.Device)
	n += uvarintLen(r.Seq) + 8
	n += uvarintLen(uint64(len(r.Source))) + len(r.Source)
	if r.MoveRef.IsZero() {
		n++
	} else {
		n += uvarintLen(uint64(r.MoveRef.Partition)+1) + uvarintLen(r.MoveRef.Offset)
	}
	n += uvarintLen(uint64(r.MoveTarget))
	n += uvarintLen(uint64(len(r.Headers)))
	for _, h := range r.Headers {
		n += uvarintLen(uint64(len(h.Key))) + len(h.Key) + uvarintLen(uint64(len(h.Value))) + len(h.Value)
	}
	return n + len(r.Payload)
}

// AppendRecord encodes r onto dst. It does not validate r; Log.Append does.
func AppendRecord(dst []byte, r *Record) []byte {
	start := len(dst)
	dst = append(dst, recordVersion, byte(r.Kind), 0, 0, 0, 0)
	dst = appendString(dst, r.Device)
	dst = binary.AppendUvarint(dst, r.Seq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.Time))
	dst = appendString(dst, r.Source)
	if r.MoveRef.IsZero() {
		dst = append(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(r.MoveRef.Partition)+1)
		dst = binary.AppendUvarint(dst, r.MoveRef.Offset)
	}
	dst = binary.AppendUvarint(dst, uint64(r.MoveTarget))
	dst = binary.AppendUvarint(dst, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = appendString(dst, h.Key)
		dst = appendString(dst, h.Value)
	}
	dst = append(dst, r.Payload...)
	crc := crc32.Checksum(dst[start+recordHeaderLen:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start+2:], crc)
	return dst
}

// DecodeRecord decodes b into r. Strings and the payload alias b (no copies, no
// allocations except for a Headers slice when r.Headers has too little capacity).
func DecodeRecord(b []byte, r *Record) error {
	if len(b) < recordHeaderLen {
		return fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != recordVersion {
		return fmt.Errorf("%w: version %d", ErrCorrupt, b[0])
	}
	kind := Kind(b[1])
	if kind != KindData && kind != KindMove {
		return fmt.Errorf("%w: kind %d", ErrCorrupt, b[1])
	}
	if crc32.Checksum(b[recordHeaderLen:], castagnoli) != binary.LittleEndian.Uint32(b[2:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	d := decoder{b: b[recordHeaderLen:]}
	r.Kind = kind
	r.Device = d.str(MaxDeviceIDLen)
	r.Seq = d.uvarint()
	r.Time = int64(d.u64())
	r.Source = d.str(MaxSourceLen)
	if p := d.uvarint(); p > 0 {
		r.MoveRef = Ref{Partition: int(p - 1), Offset: d.uvarint()}
	} else {
		r.MoveRef = Ref{}
	}
	r.MoveTarget = int(d.uvarint())
	n := d.uvarint()
	if n > MaxHeaders {
		return fmt.Errorf("%w: %d headers", ErrCorrupt, n)
	}
	r.Headers = r.Headers[:0]
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.str(len(d.b))
		v := d.str(len(d.b))
		r.Headers = append(r.Headers, Header{Key: k, Value: v})
	}
	if d.err != nil {
		return d.err
	}
	r.Payload = d.b
	if len(r.Device) == 0 || r.MoveTarget > 1<<16 || r.MoveRef.Partition > 1<<16 {
		return fmt.Errorf("%w: bad fields", ErrCorrupt)
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated field", ErrCorrupt)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) str(max int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := unsafeString(d.b[:n])
	d.b = d.b[n:]
	return s
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
