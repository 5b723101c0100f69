package uplink_test

import (
	"testing"

	"edgeq/bridge/uplink"
	"edgeq/gateway/groups"
	"edgeq/gateway/nodestats"
	"edgeq/wal"
)

// TestGroupLagBytes: the lag in bytes is each partition's lag times its
// mean stored record size; a peer's partition counts at this node's mean; a
// node that does not lead the group reports nothing.
func TestGroupLagBytes(t *testing.T) {
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "uplink:cloud"}
	s := &nodestats.Snapshot{Node: "gw-a", Log: wal.Stats{Partitions: []wal.PartitionStats{
		{Partition: 0, First: 1, Last: 100, Durable: 100, Bytes: 100 * 50}, // 50 bytes a record
		{Partition: 1, First: 11, Last: 20, Durable: 20, Bytes: 10 * 200},  // 200 bytes a record
		{Partition: 2}, // empty
	}}}
	s.Groups = []groups.GroupStats{{Key: key, Leading: true,
		Core: groups.CoreStats{Partitions: []groups.PartitionStats{{Partition: 0, Committed: 90}, {Partition: 1, Committed: 15},
			{Partition: 2}, {Partition: 3, Committed: 4}}},
		Partitions: map[int]groups.PartitionRef{0: {Node: "gw-a", Partition: 0}, 1: {Node: "gw-a", Partition: 1},
			2: {Node: "gw-a", Partition: 2}, 3: {Node: "gw-b", Partition: 0, Durable: 6}}}}
	means := uplink.MeanRecordSizes(s.Log.Partitions)
	lagOf := func(g *groups.GroupStats, p int, committed uint64) uint64 {
		_, lag := s.GroupPartition(g, p, committed)
		return lag
	}
	// Local: 10 × 50 + 5 × 200; gw-b/0: 2 records at this node's mean,
	// (5000 + 2000) / 110 bytes: 500 + 1000 + 127.3.
	recs, b, leading := means.GroupLag(s.Node, s.Groups, key, lagOf)
	if want := uint64(1627); recs != 17 || b != want || !leading {
		t.Errorf("lag %d records, %d bytes, leading %v; want 17, %d, true", recs, b, leading, want)
	}
	s.Groups[0].Leading, s.Groups[0].Core = false, groups.CoreStats{}
	if recs, b, leading := means.GroupLag(s.Node, s.Groups, key, lagOf); recs != 0 || b != 0 || leading {
		t.Errorf("not leading: %d records, %d bytes, leading %v", recs, b, leading)
	}
	if recs, b, leading := means.GroupLag(s.Node, s.Groups, groups.GroupKey{Filter: "x", Queue: "y"}, lagOf); recs != 0 || b != 0 || leading {
		t.Errorf("unknown group: %d, %d, %v", recs, b, leading)
	}
}
