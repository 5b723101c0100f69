package uplink

import (
	"edgeq/gateway/groups"
	"edgeq/wal"
)

// RecordMeans are the mean stored record sizes of the local partitions
// (framing included), and of the whole local log: what an uplink's lag in
// bytes is estimated with.
type RecordMeans struct {
	part map[int]float64
	node float64
}

// MeanRecordSizes reads the record means out of the log's partition stats.
func MeanRecordSizes(parts []wal.PartitionStats) RecordMeans {
	m := RecordMeans{part: make(map[int]float64, len(parts))}
	var bytes, records float64
	for _, p := range parts {
		if p.First > 0 && p.Last >= p.First && p.Bytes > 0 {
			k := float64(p.Last - p.First + 1)
			m.part[p.Partition] = float64(p.Bytes) / k
			bytes, records = bytes+float64(p.Bytes), records+k
		}
	}
	if records > 0 {
		m.node = bytes / records
	}
	return m
}

// PartitionLag tells a group's lag in its partition p (the group's
// numbering) at committed: the node's snapshot knows the durable offsets.
type PartitionLag func(g *groups.GroupStats, p int, committed uint64) uint64

// GroupLag is the lag of the group of key among gs (one snapshot of the
// node named node) in records and, estimated without reading a record, in
// bytes: each partition's lag times its mean stored record size. A peer's
// partition, whose sizes this node does not know, is counted at this
// node's mean. leading is false (and the lags 0) where this node does not
// deliver the group.
func (means RecordMeans) GroupLag(node string, gs []groups.GroupStats, key groups.GroupKey, lagOf PartitionLag) (records, bytes uint64, leading bool) {
	for i := range gs {
		g := &gs[i]
		if g.Key != key {
			continue
		}
		var b float64
		for _, p := range g.Core.Partitions {
			lag := lagOf(g, p.Partition, p.Committed)
			records += lag
			mean := means.node
			if ref, remote := g.Partitions[p.Partition]; !remote || ref.Node == node {
				local := p.Partition
				if remote {
					local = ref.Partition
				}
				mean = means.part[local]
			}
			b += float64(lag) * mean
		}
		return records, uint64(b + 0.5), g.Leading
	}
	return 0, 0, false
}
