package cluster

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// got is what a member or the dead-letter hook kept of a delivery (copied:
// the delivery is valid only during the call).
type got struct {
	queue, reason       string
	device, source      string
	seq                 uint64
	headers             []wal.Header
	payload             string
	node                string
	partition           int
	offset              uint64
	deliveries          int
	maybe               bool
	ack                 groups.AckHandle
	rawMatchesDelivered bool
}

func keep(d *groups.Delivery) got {
	var rec wal.Record
	ok := wal.DecodeRecord(d.Raw, &rec) == nil && rec.Device == d.Record.Device && rec.Seq == d.Record.Seq
	return got{device: d.Record.Device, source: d.Record.Source, seq: d.Record.Seq,
		headers: append([]wal.Header(nil), d.Record.Headers...), payload: string(d.Record.Payload), node: d.Node,
		partition: d.Partition, offset: d.Offset, deliveries: d.Deliveries, maybe: d.MaybeDelivered, ack: d.Ack,
		rawMatchesDelivered: ok}
}

type keepingMember struct{ got []got }

func (m *keepingMember) Deliver(d *groups.Delivery) bool {
	m.got = append(m.got, keep(d))
	return true
}

// forwardRig is a member's node: a registry with one local member, and the
// peer link that takes FORWARD frames for it.
type forwardRig struct {
	p    *peerLink
	key  groups.GroupKey
	gid  groups.MemberID
	dead []got
}

func newForwardRig(t testing.TB, m groups.Member) *forwardRig {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 2, 1
	l, err := wal.Open(t.TempDir(), o, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rig := &forwardRig{key: groups.GroupKey{Filter: "telemetry.>", Queue: "workers"}}
	reg := groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: groups.DefaultCoreConfig(),
		GroupTTL: time.Hour, MaxGroups: 8, DeadLetters: func(queue string, d *groups.Delivery, reason string) {
			g := keep(d)
			g.queue, g.reason = queue, reason
			rig.dead = append(rig.dead, g)
		}}, l, logger)
	t.Cleanup(func() { reg.Drain(time.Now().Add(5 * time.Second)) })
	if rig.gid, err = reg.Join(rig.key, "w1", m, 256); err != nil {
		t.Fatal(err)
	}
	rig.p = newPeerLink(nil, logger)
	rig.p.reg = reg
	return rig
}

func (rig *forwardRig) frame(m Forward) Frame {
	m.Group = wireGroup(rig.key)
	return Frame{Type: TypeForward, Body: AppendForward(nil, &m)}
}

// TestForwardIn: a FORWARD reaches the member it names as the delivery the
// leader made (record decoded once here, where it is stored, its ack
// handle), a dead letter reaches the dead-letter hook with its reason and
// no ack handle, a record that does not decode reaches nobody, and nothing
// of one frame's record shows in the next one's (the scratch is reused).
func TestForwardIn(t *testing.T) {
	m := &keepingMember{}
	rig := newForwardRig(t, m)
	withHeaders := wal.Record{Kind: wal.KindData, Device: "dev-1", Seq: 7, Time: 1, Source: "nats",
		Headers: []wal.Header{{Key: "A", Value: "1"}, {Key: "B", Value: "2"}}, Payload: []byte("first")}
	plain := wal.Record{Kind: wal.KindData, Device: "dev-2", Seq: 8, Time: 2, Source: "http", Payload: []byte("second")}
	corrupt := wal.AppendRecord(nil, &plain)
	corrupt[len(corrupt)-1] ^= 0xff

	member := string(rig.gid)
	rig.p.Frame("n2", rig.frame(Forward{Member: member, Instance: 5, CorePartition: 2049, Node: "n2", Partition: 1, Offset: 42,
		Deliveries: 2, Maybe: true, Record: wal.AppendRecord(nil, &withHeaders)}))
	rig.p.Frame("n2", rig.frame(Forward{Member: member, Instance: 5, CorePartition: 2048, Node: "n2", Partition: 0, Offset: 43,
		Deliveries: 1, Record: wal.AppendRecord(nil, &plain)}))
	rig.p.Frame("n2", rig.frame(Forward{Member: member, Instance: 5, CorePartition: 2048, Node: "n2", Partition: 0, Offset: 44,
		Deliveries: 1, Record: corrupt}))
	rig.p.Frame("n3", rig.frame(Forward{Reason: "max_deliver", Instance: 9, CorePartition: 4096, Node: "n3", Offset: 3,
		Deliveries: 5, Record: wal.AppendRecord(nil, &withHeaders)}))

	want := []got{
		{device: "dev-1", source: "nats", seq: 7, headers: withHeaders.Headers, payload: "first", node: "n2", partition: 1, offset: 42,
			deliveries: 2, maybe: true, ack: groups.AckHandle{Group: 5, Member: rig.gid, Partition: 2049, Offset: 42, Deliveries: 2},
			rawMatchesDelivered: true},
		{device: "dev-2", source: "http", seq: 8, payload: "second", node: "n2", partition: 0, offset: 43,
			deliveries: 1, ack: groups.AckHandle{Group: 5, Member: rig.gid, Partition: 2048, Offset: 43, Deliveries: 1},
			rawMatchesDelivered: true},
	}
	if !reflect.DeepEqual(m.got, want) {
		t.Fatalf("member got\n%+v\nwant\n%+v", m.got, want)
	}
	wantDead := []got{{queue: "workers", reason: "max_deliver", device: "dev-1", source: "nats", seq: 7, headers: withHeaders.Headers,
		payload: "first", node: "n3", offset: 3, deliveries: 5, rawMatchesDelivered: true}}
	if !reflect.DeepEqual(rig.dead, wantDead) {
		t.Fatalf("dead letters\n%+v\nwant\n%+v", rig.dead, wantDead)
	}
}
