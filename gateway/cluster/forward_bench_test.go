package cluster

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// countingMember takes every delivery and checks the record decoded whole.
type countingMember struct {
	n       int
	payload int
}

func (m *countingMember) Deliver(d *groups.Delivery) bool {
	m.n++
	m.payload += len(d.Record.Payload) + len(d.Record.Headers)
	return true
}

// BenchmarkForwardIn measures a member's node taking a FORWARD from a
// leader: the frame body is decoded, its record decoded (once on this
// node) and handed to the local member as a groups.Delivery. Allocations
// are per forwarded delivery.
func BenchmarkForwardIn(b *testing.B) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 2, 1
	l, err := wal.Open(b.TempDir(), o, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	reg := groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: groups.DefaultCoreConfig(),
		GroupTTL: time.Hour, MaxGroups: 8}, l, logger)
	defer reg.Drain(time.Now().Add(5 * time.Second))
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "workers"}
	m := &countingMember{}
	gid, err := reg.Join(key, "w1", m, 256)
	if err != nil {
		b.Fatal(err)
	}
	rec := wal.Record{Kind: wal.KindData, Device: "dev-0042", Seq: 7, Time: time.Now().UnixNano(), Source: "nats",
		Headers: []wal.Header{{Key: "Content-Type", Value: "application/json"}, {Key: "Trace", Value: "abc"}},
		Payload: make([]byte, 64)}
	body := AppendForward(nil, &Forward{Group: wireGroup(key), Member: string(gid), Instance: 12345, CorePartition: 2049,
		Node: "n2", Partition: 1, Offset: 42, Deliveries: 1, Record: wal.AppendRecord(nil, &rec)})
	p := newPeerLink(nil, logger)
	p.reg = reg
	b.ReportAllocs()
	for b.Loop() {
		p.Frame("n2", Frame{Type: TypeForward, Body: body})
	}
	if m.n != b.N || m.payload != b.N*(64+2) {
		b.Fatalf("member took %d deliveries (%d bytes), want %d", m.n, m.payload, b.N)
	}
}
