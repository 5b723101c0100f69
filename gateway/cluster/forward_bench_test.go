package cluster

import (
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// countingMember takes every delivery and counts what it read of it.
type countingMember struct{ n, bytes int }

func (m *countingMember) Deliver(d *groups.Delivery) bool {
	m.n++
	m.bytes += len(d.Record.Payload) + len(d.Record.Headers)
	return true
}

// BenchmarkForwardIn measures a member's node taking a FORWARD from a
// leader: the frame body is decoded, its record decoded (once on this
// node) and handed to the local member as a groups.Delivery. Allocations
// are per forwarded delivery.
func BenchmarkForwardIn(b *testing.B) {
	m := &countingMember{}
	rig := newForwardRig(b, m)
	rec := wal.Record{Kind: wal.KindData, Device: "dev-0042", Seq: 7, Time: time.Now().UnixNano(), Source: "nats",
		Headers: []wal.Header{{Key: "Content-Type", Value: "application/json"}, {Key: "Trace", Value: "abc"}},
		Payload: make([]byte, 64)}
	f := rig.frame(Forward{Member: string(rig.gid), Instance: 12345, CorePartition: 2049, Node: "n2", Partition: 1, Offset: 42,
		Deliveries: 1, Record: wal.AppendRecord(nil, &rec)})
	b.ReportAllocs()
	for b.Loop() {
		rig.p.Frame("n2", f)
	}
	if m.n != b.N || m.bytes != b.N*(64+2) {
		b.Fatalf("member took %d deliveries (%d bytes), want %d", m.n, m.bytes, b.N)
	}
}
