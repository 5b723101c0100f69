package groups

import (
	"reflect"
	"slices"
	"testing"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// TestRemoteMsgs: records from an owner decode into messages numbered with
// the group's partition IDs, each keeping its own headers (the shared arena
// never lets one record's headers show through another's), and a record that
// does not decode is reported and left out.
func TestRemoteMsgs(t *testing.T) {
	hdr := func(kv ...string) []wal.Header {
		var h []wal.Header
		for i := 0; i < len(kv); i += 2 {
			h = append(h, wal.Header{Key: kv[i], Value: kv[i+1]})
		}
		return h
	}
	recs := []wal.Record{
		{Kind: wal.KindData, Device: "a", Seq: 1, Time: 10, Headers: hdr("K", "1")},
		{Kind: wal.KindData, Device: "b", Seq: 1, Time: 11},
		{Kind: wal.KindMove, Device: "a", Seq: 0, Time: 12, MoveTarget: 5},
		{Kind: wal.KindData, Device: "c", Seq: 1, Time: 13, Headers: hdr("K", "2", "L", "3", "M", "4", "N", "5")},
		{Kind: wal.KindData, Device: "a", Seq: 2, Time: 14, MoveRef: wal.Ref{Partition: 1, Offset: 3}, Headers: hdr("K", "6")},
	}
	const base, partition = 2 * partitionStride, 2*partitionStride + 1
	var batch RemoteBatch
	raws := make([][]byte, len(recs))
	for i := range recs {
		raws[i] = wal.AppendRecord(nil, &recs[i])
		batch.Records = append(batch.Records, RemoteRecord{Offset: uint64(i + 1), Raw: raws[i]})
	}
	corrupt := slices.Clone(batch.Records[1].Raw)
	corrupt[len(corrupt)-1] ^= 0xff
	batch.Records = slices.Insert(batch.Records, 2, RemoteRecord{Offset: 99, Raw: corrupt})

	var bad []uint64
	msgs := remoteMsgs(partition, base, batch, func(o uint64) { bad = append(bad, o) })
	if !slices.Equal(bad, []uint64{99}) {
		t.Fatalf("bad records reported %v, want [99]", bad)
	}
	if len(msgs) != len(recs) {
		t.Fatalf("%d messages, want %d", len(msgs), len(recs))
	}
	for i, m := range msgs {
		want := recs[i]
		rec, ok := m.Body.(*wal.Record)
		if !ok || m.Partition != partition || m.Offset != uint64(i+1) || m.Device != want.Device || m.Seq != want.Seq ||
			m.IngestTime != want.Time || rec.Device != want.Device || rec.Seq != want.Seq || &m.Data[0] != &raws[i][0] {
			t.Fatalf("message %d = %+v", i, m)
		}
		if !slices.Equal(rec.Headers, want.Headers) {
			t.Fatalf("message %d headers %v, want %v", i, rec.Headers, want.Headers)
		}
		if len(rec.Headers) != cap(rec.Headers) {
			t.Fatalf("message %d headers have spare capacity %d: an append would write into the next record's", i, cap(rec.Headers)-len(rec.Headers))
		}
	}
	if m := msgs[2]; m.Kind != queue.KindMoveMarker || m.MoveTarget != base+5 {
		t.Fatalf("marker = kind %v target %d, want marker to %d", m.Kind, m.MoveTarget, base+5)
	}
	if m := msgs[4]; m.Kind != queue.KindData || m.MoveRef != (queue.Ref{Partition: base + 1, Offset: 3}) {
		t.Fatalf("moved record's marker = %v, want p%d@3", m.MoveRef, base+1)
	}
	if m := msgs[0]; !m.MoveRef.IsZero() {
		t.Fatalf("unmoved record has marker %v", m.MoveRef)
	}
}

// TestLocalAndRemoteMsgsAgree: the same records read from this node's log
// and fetched from an owner make the same messages (base 0).
func TestLocalAndRemoteMsgsAgree(t *testing.T) {
	raws := benchRecords(8)
	var entries []wal.Entry
	var batch RemoteBatch
	for i, raw := range raws {
		e := wal.Entry{Offset: uint64(i + 1), Raw: raw}
		if err := wal.DecodeRecord(raw, &e.Record); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
		batch.Records = append(batch.Records, RemoteRecord{Offset: e.Offset, Raw: raw})
	}
	local := localMsgs(3, entries)
	remote := remoteMsgs(3, 0, batch, func(o uint64) { t.Fatalf("bad record at %d", o) })
	for i := range local {
		l, r := local[i], remote[i]
		lr, rr := l.Body.(*wal.Record), r.Body.(*wal.Record)
		l.Body, r.Body = nil, nil
		if !slices.Equal(l.Data, r.Data) || lr.Device != rr.Device || !slices.Equal(lr.Headers, rr.Headers) || string(lr.Payload) != string(rr.Payload) {
			t.Fatalf("record %d differs: %+v vs %+v", i, lr, rr)
		}
		l.Data, r.Data = nil, nil
		if !reflect.DeepEqual(l, r) {
			t.Fatalf("message %d differs: %+v vs %+v", i, l, r)
		}
	}
}
