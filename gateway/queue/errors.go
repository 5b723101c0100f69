package queue

import "errors"

// Sentinel errors; every error the group returns wraps one of them with
// "queue: <operation>: ..." context, so test them with errors.Is.

var (
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrStale is returned for an ack, nak, in_progress or term that does not
	// match the current delivery attempt (wrong member, wrong delivery count,
	// already finished or unknown). It is ignored and counted in Stats.StaleAcks.
	ErrStale = errors.New("stale acknowledgement")
	// ErrUnknownMember is returned by RemoveMember and SetCredit for an ID that is not a member.
	ErrUnknownMember = errors.New("unknown member")
	// ErrMemberExists is returned by AddMember for an ID that is already a member.
	ErrMemberExists = errors.New("member already exists")
	// ErrTooManyMembers is returned by AddMember when Config.MaxMembers is reached.
	ErrTooManyMembers = errors.New("too many members")
	// ErrBadCredit is returned for a negative credit.
	ErrBadCredit = errors.New("credit must be >= 0")
	// ErrUnknownPartition is returned by Fetched for a partition the group does not read.
	ErrUnknownPartition = errors.New("unknown partition")
	// ErrPartitionExists is returned by AddPartition for a partition the group already reads.
	ErrPartitionExists = errors.New("partition already exists")
	// ErrTooManyPartitions is returned when Config.MaxPartitions is reached.
	ErrTooManyPartitions = errors.New("too many partitions")
	// ErrNoFetch is returned by Fetched when no Fetch is outstanding for the partition.
	ErrNoFetch = errors.New("no fetch outstanding")
	// ErrBadBatch is returned by Fetched for records out of order, from
	// another partition, or beyond the reported next offset.
	ErrBadBatch = errors.New("malformed fetch answer")
	// ErrDrained is returned by every input after the group has drained.
	ErrDrained = errors.New("group drained")
	// ErrNilRand is returned by New without a random source.
	ErrNilRand = errors.New("nil random source")
)
