package groups

import (
	"edgeq/gateway/queue"
	"edgeq/wal"
)

// A stored record is decoded once on each node that reads it, and turned
// into the core's message once (msgOf): the message carries the decoded
// record (Body) and its encoding (Data), and the runner makes the member's
// Delivery of exactly these (runner.record), with no second decode.

// msgOf is the core's message of the record stored at offset of a
// partition, decoded into rec. partition is the group's partition ID and
// base the ID of the owner node's partition 0 (0 for this node's): a move
// marker's target and a moved record's marker are numbered by the owner.
func msgOf(partition, base int, offset uint64, raw []byte, rec *wal.Record) queue.Msg {
	m := queue.Msg{Partition: partition, Offset: offset, Kind: queue.KindData, Device: rec.Device,
		Seq: rec.Seq, IngestTime: rec.Time, Data: raw, Body: rec}
	if rec.Kind == wal.KindMove {
		m.Kind = queue.KindMoveMarker
		m.MoveTarget = base + rec.MoveTarget
	}
	if rec.MoveRef.Offset != 0 {
		m.MoveRef = queue.Ref{Partition: base + rec.MoveRef.Partition, Offset: rec.MoveRef.Offset}
	}
	return m
}

// localMsgs is the core's messages of a batch this node's log read (and
// decoded) from partition.
func localMsgs(partition int, entries []wal.Entry) []queue.Msg {
	msgs := make([]queue.Msg, len(entries))
	for i := range entries {
		e := &entries[i]
		msgs[i] = msgOf(partition, 0, e.Offset, e.Raw, &e.Record)
	}
	return msgs
}

// maxHeaderArena bounds the headers one arena holds (32 bytes each).
const maxHeaderArena = 256

// remoteMsgs decodes the records an owner node answered a FETCH with into
// the core's messages, with the group's partition IDs (see msgOf). A
// record that does not decode is left out and reported to bad (the core
// counts the missing offset as lost).
//
// The batch's records and their headers are allocated together: each
// record is decoded with a reused scratch header slice whose contents are
// then copied into a shared arena, so a batch allocates a few slices, not
// one or two per record with headers.
func remoteMsgs(partition, base int, b RemoteBatch, bad func(offset uint64)) []queue.Msg {
	msgs := make([]queue.Msg, 0, len(b.Records))
	recs := make([]wal.Record, len(b.Records))
	var scratch, arena []wal.Header
	for i, rr := range b.Records {
		rec := &recs[i]
		rec.Headers = scratch[:0]
		err := wal.DecodeRecord(rr.Raw, rec)
		scratch = rec.Headers[:0]
		if err != nil {
			rec.Headers = nil
			bad(rr.Offset)
			continue
		}
		if n := len(rec.Headers); n == 0 {
			rec.Headers = nil
		} else {
			if cap(arena)-len(arena) < n {
				// Room for the rest of the batch if it is like this record.
				arena = make([]wal.Header, 0, max(n, min(n*(len(b.Records)-i), maxHeaderArena)))
			}
			start := len(arena)
			arena = append(arena, rec.Headers...)
			rec.Headers = arena[start:len(arena):len(arena)] // capped: no append reaches the next record's
		}
		msgs = append(msgs, msgOf(partition, base, rr.Offset, rr.Raw, rec))
	}
	return msgs
}
