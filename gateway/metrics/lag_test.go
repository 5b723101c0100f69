package metrics_test

import (
	"testing"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// TestGroupLagAtOneMoment: a group's lag is durable - committed as both
// stood when the group's stats were taken. The log's live durable offset
// has moved on since (records delivered and acked within the second the
// stats are old): counting them showed lag 1–2 in every partition with
// nothing pending.
func TestGroupLagAtOneMoment(t *testing.T) {
	s := &Snapshot{Node: "n1", Log: wal.Stats{Partitions: []wal.PartitionStats{{Partition: 0, Durable: 12}, {Partition: 1, Durable: 40}}}}
	g := &groups.GroupStats{Leading: true,
		Core:    groups.CoreStats{Partitions: []groups.PartitionStats{{Partition: 0, Committed: 10}, {Partition: 1, Committed: 35}}},
		Durable: map[int]uint64{0: 10, 1: 37}}
	for _, c := range []struct {
		p    int
		want uint64
	}{{0, 0}, {1, 2}} {
		name, lag := s.GroupPartition(g, c.p, g.Core.Partitions[c.p].Committed)
		if lag != c.want || name != []string{"0", "1"}[c.p] {
			t.Errorf("partition %d: %s lag %d, want %d", c.p, name, lag, c.want)
		}
	}
	// Without the group's own durable offsets (a peer's view), the log's.
	g.Durable = nil
	if _, lag := s.GroupPartition(g, 0, 10); lag != 2 {
		t.Errorf("fallback lag %d, want 2", lag)
	}
	// A peer's partition in a cluster: named by its owner.
	g.Partitions = map[int]groups.PartitionRef{1<<16 + 2: {Node: "gw-b", Partition: 2, Durable: 9}}
	g.Durable = map[int]uint64{1<<16 + 2: 8}
	if name, lag := s.GroupPartition(g, 1<<16+2, 5); name != "gw-b/2" || lag != 3 {
		t.Errorf("peer partition: %s lag %d, want gw-b/2 lag 3", name, lag)
	}
}
