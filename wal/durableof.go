package wal

// DurableOf is partition p's durable offset in the stats (0 when the log
// has no such partition).
func (s *Stats) DurableOf(p int) uint64 {
	if p >= 0 && p < len(s.Partitions) && s.Partitions[p].Partition == p {
		return s.Partitions[p].Durable
	}
	for _, ps := range s.Partitions {
		if ps.Partition == p {
			return ps.Durable
		}
	}
	return 0
}
