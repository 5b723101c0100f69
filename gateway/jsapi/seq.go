// Package jsapi is the JetStream face of edgeq: the JetStream API subset
// ($JS.API.*) over the node's log and queue groups, JetStream ack subjects
// ($JS.ACK.*), stream sequences and Nats-Msg-Id deduplication. It knows no
// connection: gateway/natsserver calls it and carries its answers. A
// JetStream consumer is a queue group (gateway/groups) seen through this API.
package jsapi

// SeqPartitionBits is the width of the partition field of a stream
// sequence. The node's stream is its partitioned log, so a stream sequence
// is a position in it, offset-major: seq = offset<<11 | partition. It is
// assigned at append, never changes (the WAL offset and partition are
// durable), grows with time within a partition, and is unique on the node;
// it is not contiguous (2048 partitions fit; wal allows 1024 + 64 hot).
const SeqPartitionBits = 11

const seqPartitionMask = 1<<SeqPartitionBits - 1

// StreamSeq is the stream sequence of (partition, offset).
func StreamSeq(partition int, offset uint64) uint64 {
	return offset<<SeqPartitionBits | uint64(partition)&seqPartitionMask
}

// SplitSeq is the inverse of StreamSeq.
func SplitSeq(seq uint64) (partition int, offset uint64) {
	return int(seq & seqPartitionMask), seq >> SeqPartitionBits
}
