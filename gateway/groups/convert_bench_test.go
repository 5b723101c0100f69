package groups

import (
	"fmt"
	"testing"

	"edgeq/wal"
)

// benchRecords encodes n records as a partition stores them: a device,
// two headers and a 64-byte payload each.
func benchRecords(n int) [][]byte {
	raws := make([][]byte, n)
	for i := range raws {
		rec := wal.Record{Kind: wal.KindData, Device: fmt.Sprintf("dev-%04d", i%100), Seq: uint64(i + 1), Time: int64(i),
			Source: "nats", Headers: []wal.Header{{Key: "Content-Type", Value: "application/json"}, {Key: "Trace", Value: "abc"}},
			Payload: make([]byte, 64)}
		raws[i] = wal.AppendRecord(nil, &rec)
	}
	return raws
}

// BenchmarkToMsgs measures turning a read batch of 64 records into the
// core's messages: local, from the entries the log decoded; remote, from
// the raw records an owner node answered a FETCH with (decoded here, once).
// Allocations are per batch.
func BenchmarkToMsgs(b *testing.B) {
	raws := benchRecords(64)
	b.Run("local", func(b *testing.B) {
		entries := make([]wal.Entry, len(raws))
		for i, raw := range raws {
			entries[i] = wal.Entry{Offset: uint64(i + 1), Raw: raw}
			if err := wal.DecodeRecord(raw, &entries[i].Record); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if msgs := localMsgs(3, entries); len(msgs) != len(entries) {
				b.Fatal("lost records")
			}
		}
	})
	b.Run("remote", func(b *testing.B) {
		batch := RemoteBatch{Next: uint64(len(raws) + 1), Records: make([]RemoteRecord, len(raws))}
		for i, raw := range raws {
			batch.Records[i] = RemoteRecord{Offset: uint64(i + 1), Raw: raw}
		}
		b.ReportAllocs()
		for b.Loop() {
			if msgs := remoteMsgs(partitionStride+3, partitionStride, batch, func(uint64) { b.Fatal("bad record") }); len(msgs) != len(raws) {
				b.Fatal("lost records")
			}
		}
	})
}
