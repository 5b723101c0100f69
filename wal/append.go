package wal

import (
	"sync"
)

// Position is where an append landed: partition, offset (the tidwall index,
// 1-based, contiguous) and the device's sequence number.
type Position struct {
	Partition int
	Offset    uint64
	Seq       uint64
}

// appendReq is one queued append. Requests are pooled: a steady stream of
// appends allocates nothing per record.
type appendReq struct {
	rec     *Record // the caller's record, untouched; owned by the log until completion
	kind    Kind
	seq     uint64
	time    int64
	moveRef Ref
	lazy    bool // nobody waits for durability: completed once written
	barrier bool // Sync's marker: no record; completed once what precedes it is durable
	pos     Position
	err     error
	done    chan struct{}         // Append: signalled once
	cb      func(Position, error) // AppendAsync
}

var reqPool = sync.Pool{New: func() any { return &appendReq{done: make(chan struct{}, 1)} }}

func getReq() *appendReq { return reqPool.Get().(*appendReq) }

func putReq(r *appendReq) {
	r.rec, r.cb, r.err, r.lazy = nil, nil, nil, false
	reqPool.Put(r)
}

// encode appends the record as stored: the caller's fields plus what the log
// assigned (kind, sequence, ingest time, move reference).
func (r *appendReq) encode(dst []byte) []byte {
	rec := *r.rec
	rec.Kind = r.kind
	rec.Seq = r.seq
	rec.Time = r.time
	rec.MoveRef = r.moveRef
	return AppendRecord(dst, &rec)
}

func (r *appendReq) encodedLen() int {
	rec := *r.rec
	rec.MoveRef = r.moveRef
	return EncodedLen(&rec)
}

// complete hands the result to the waiter. It is called once, by the writer.
func (r *appendReq) complete(err error) {
	r.err = err
	if r.cb != nil {
		cb, pos := r.cb, r.pos
		putReq(r)
		cb(pos, err)
		return
	}
	r.done <- struct{}{}
}
