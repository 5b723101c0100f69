package wal

import (
	"context"
	"testing"
)

func TestMoveToHotPartitionAndBack(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	l := openTest(t, dir, o)
	ctx := context.Background()
	home, hot := l.HomePartition("hot"), l.HotPartition("hot")
	if hot < o.Partitions || hot >= o.TotalPartitions() {
		t.Fatalf("hot partition %d outside the hot range", hot)
	}
	before := appendN(t, l, "hot", 3)
	marker, err := l.Move(ctx, "hot", hot)
	if err != nil {
		t.Fatal(err)
	}
	if marker.Partition != home || marker.Offset != before[2].Offset+1 {
		t.Fatalf("marker at %+v, want right after %+v in the home partition", marker, before[2])
	}
	after := appendN(t, l, "hot", 2)
	if after[0].Partition != hot || after[0].Seq != 4 || after[1].Seq != 5 {
		t.Fatalf("appends after move: %+v", after)
	}
	es := readAll(t, l, hot)
	if len(es) != 2 || es[0].Record.MoveRef != (Ref{home, marker.Offset}) {
		t.Fatalf("hot records do not point at their marker: %+v", es)
	}
	hm := readAll(t, l, home)
	if m := hm[len(hm)-1].Record; m.Kind != KindMove || m.MoveTarget != hot || m.Device != "hot" {
		t.Fatalf("marker record %+v", m)
	}
	// Routing survives a restart, with and without the checkpoint.
	for round := 0; round < 2; round++ {
		l.Close()
		if round == 1 {
			removeFile(dir, checkpointFile)
		}
		l = openTest(t, dir, o)
		if p := l.DevicePartition("hot"); p != hot {
			t.Fatalf("round %d: device routed to %d after reopen, want %d", round, p, hot)
		}
	}
	ps := appendN(t, l, "hot", 1)
	if ps[0].Partition != hot || ps[0].Seq != 6 {
		t.Fatalf("append after reopen: %+v", ps[0])
	}
	// And back home when it cools down.
	back, err := l.Move(ctx, "hot", home)
	if err != nil {
		t.Fatal(err)
	}
	home2 := appendN(t, l, "hot", 1)
	if back.Partition != hot || home2[0].Partition != home || home2[0].Seq != 7 {
		t.Fatalf("move back: marker %+v, append %+v", back, home2[0])
	}
	es = readAll(t, l, home)
	if ref := es[len(es)-1].Record.MoveRef; ref != (Ref{hot, back.Offset}) {
		t.Fatalf("record after moving back points at %+v", ref)
	}
	// A move to where the device already is writes nothing.
	if _, err := l.Move(ctx, "hot", home); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, l, hot)); n != 4 {
		t.Fatalf("hot partition has %d records, want 4 (2 + 1 + marker)", n)
	}
	l.Close()
}
