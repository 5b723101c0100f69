package queue

import "fmt"

// Kind tells data records from move markers.
type Kind uint8

const (
	// KindData is a telemetry record: it is delivered to a member.
	KindData Kind = iota
	// KindMoveMarker marks the point where a device's later records continue in
	// another partition. It is never delivered; it only orders the device.
	KindMoveMarker
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindMoveMarker:
		return "marker"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Ref names one record: a partition and an offset in it. WAL offsets start
// at 1, so the zero Ref (Offset 0) means "none".
type Ref struct {
	Partition int
	Offset    uint64
}

// IsZero reports whether r names no record.
func (r Ref) IsZero() bool { return r.Offset == 0 }

func (r Ref) String() string { return fmt.Sprintf("p%d@%d", r.Partition, r.Offset) }

// Msg is one record as the runner read it from storage. The core reads only
// the routing fields; Data is opaque (the encoded record) and only its length
// counts against the read-ahead byte budget, as is Body. The core never writes to Data and
// keeps a reference to it until the record is finished.
type Msg struct {
	Partition  int
	Offset     uint64
	Kind       Kind
	Device     string
	Seq        uint64 // per-device sequence number on the ingesting node
	IngestTime int64  // unix ns
	// MoveTarget is the partition a move marker sends the device to (markers only).
	MoveTarget int
	// MoveRef is the marker that moved the device into this partition (data
	// written after a move); zero when the device never moved.
	MoveRef Ref
	Data    []byte
	// Body is the runner's decoded form of Data, carried so a record is
	// decoded once on its way out; the core never looks at it.
	Body any
}

// Ref returns the position of m.
func (m *Msg) Ref() Ref { return Ref{Partition: m.Partition, Offset: m.Offset} }
