package queue

import "fmt"

// memStore simulates the storage the runner reads: partitions of records
// with 1-based offsets, per-node per-device sequence numbers, hot-device
// moves (a marker in the old partition, MoveRef on every later record) and
// retention (a dropped prefix). Partition p belongs to node p/100.
type memStore struct {
	parts map[int]*memPartition
	devs  map[devKey]*devPos
}

type memPartition struct {
	first uint64 // lowest retained offset
	recs  []Msg  // recs[i] has offset i+1
}

type devKey struct {
	node int
	dev  string
}

type devPos struct {
	part    int
	seq     uint64
	moveRef Ref
}

func newMemStore(partitions ...int) *memStore {
	s := &memStore{parts: map[int]*memPartition{}, devs: map[devKey]*devPos{}}
	for _, p := range partitions {
		s.parts[p] = &memPartition{first: 1}
	}
	return s
}

func nodeOf(part int) int { return part / 100 }

// position returns the device's state on node, placing a new device in home.
func (s *memStore) position(node int, dev string, home int) *devPos {
	k := devKey{node, dev}
	if pos, ok := s.devs[k]; ok {
		return pos
	}
	pos := &devPos{part: home}
	s.devs[k] = pos
	return pos
}

func (s *memStore) appendRec(m Msg) Msg {
	p := s.parts[m.Partition]
	m.Offset = uint64(len(p.recs)) + 1
	p.recs = append(p.recs, m)
	return m
}

// publish appends one data record of dev on node (home is its partition if it is new there).
func (s *memStore) publish(node int, dev string, home, size int) Msg {
	pos := s.position(node, dev, home)
	pos.seq++
	data := make([]byte, size)
	copy(data, fmt.Sprintf("%s#%d", dev, pos.seq))
	return s.appendRec(Msg{Partition: pos.part, Kind: KindData, Device: dev, Seq: pos.seq,
		IngestTime: int64(pos.seq), MoveRef: pos.moveRef, Data: data})
}

// move appends a move marker for dev in its current partition; its later records go to target.
func (s *memStore) move(node int, dev string, home, target int) Msg {
	pos := s.position(node, dev, home)
	m := s.appendRec(Msg{Partition: pos.part, Kind: KindMoveMarker, Device: dev,
		MoveTarget: target, MoveRef: pos.moveRef})
	pos.part, pos.moveRef = target, m.Ref()
	return m
}

// drop removes every record below offset before (retention).
func (s *memStore) drop(part int, before uint64) {
	p := s.parts[part]
	if before > p.first {
		p.first = min(before, uint64(len(p.recs))+1)
	}
}

// end is the offset the next record of part will get.
func (s *memStore) end(part int) uint64 { return uint64(len(s.parts[part].recs)) + 1 }

// hasNews reports whether a Fetch from offset from would return something
// (records, or skipped offsets): the long-poll condition.
func (s *memStore) hasNews(part int, from uint64) bool { return s.end(part) > from }

// read answers a Fetch: records from max(from, first) on, at most maxMsgs,
// and after the first at most maxBytes of Data; next follows the last one
// returned (or the end when none is).
func (s *memStore) read(part int, from uint64, maxMsgs, maxBytes int) ([]Msg, uint64) {
	p := s.parts[part]
	off := max(from, p.first)
	var out []Msg
	bytes := 0
	for ; off < s.end(part) && len(out) < maxMsgs; off++ {
		m := p.recs[off-1]
		if len(out) > 0 && bytes+len(m.Data) > maxBytes {
			break
		}
		bytes += len(m.Data)
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, max(from, s.end(part))
	}
	return out, off
}

func (s *memStore) record(r Ref) (Msg, bool) {
	p, ok := s.parts[r.Partition]
	if !ok || r.Offset == 0 || r.Offset > uint64(len(p.recs)) {
		return Msg{}, false
	}
	return p.recs[r.Offset-1], true
}
