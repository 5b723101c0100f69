package groups

// startAt is the committed position for a group placed at off (what it has
// finished) in partition p, within what is stored: from the first record
// still there up to the durable end (a position past it starts with the
// next record appended).
func (r *Registry) startAt(p int, off uint64) uint64 {
	return min(max(off, r.log.First(p)-1), r.log.Durable(p))
}
