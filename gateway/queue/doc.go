// Package queue is the core of an edgeq queue group: a pure,
// deterministic state machine that decides which stored message goes to
// which member, when, and which offsets may be committed. It does no I/O,
// starts no goroutine and reads no clock: time (now) and randomness (Rand)
// are inputs, so every behaviour is reproducible in tests.
//
// # Inputs and outputs
//
// The runner (gateway/groups: one goroutine owning a Group) feeds events in —
// AddMember, RemoveMember, SetCredit, Fetched, Ack, Nak, InProgress, Term,
// Tick, Drain — and after each batch of events calls Ready, which returns
// the actions to carry out: Deliver, Fetch, Commit, DeadLetter, Drained.
// NextDeadline says when Tick next has work, so the runner sleeps instead
// of polling.
//
// # The runner's duties
//
//   - Durable before delivered: Fetched must only be given records that are
//     durable in storage (below the WAL's high-water mark), so nothing a
//     member processed can vanish in a crash.
//   - Fetch: answer each Fetch with exactly one Fetched. There is at most one
//     outstanding Fetch per partition; it is emitted by Ready whenever the
//     partition's window has room (Config.ReadAheadMsgs / ReadAheadBytes)
//     and no Fetch is outstanding. The runner may hold it until new records
//     are durable (long poll), so an idle group does not spin. A Fetch with
//     End set asks only where the partition ends (deliver: new). A Fetch
//     with Refetch set reads again records set aside by the per-device
//     share (aside.go): answer it at once with Refetched; at most one is
//     outstanding per partition, besides the ordinary one.
//   - Handle a Ready in this order: DeadLetter (publish), Deliver, Fetch,
//     Commit, Drained. A Commit may cover messages dead-lettered in the
//     same Ready, so dead letters are published before the commit is
//     persisted. Commits may be persisted lazily (periodically and on
//     shutdown): a lagging commit only means more redelivery after a crash.
//   - A delivery the runner cannot hand over: Nak it for the member, or
//     RemoveMember if the member is gone; a member that leaves or fails
//     must be removed so its messages go to others.
//   - Msg.Data is owned by the group from Fetched until the message is
//     finished (acked, dead-lettered, filtered out); the group never writes to it.
//   - Partition IDs are the runner's: in a cluster it maps (node, partition)
//     to a unique int, and translates Msg.MoveRef the same way.
//
// # Rules the core keeps
//
//   - Ordering per_device (default): at most one message per device in flight
//     (out of its device queue at all, counting nak delays); a device's
//     messages go out in append order. Messages of one device that arrive
//     through several nodes are ordered per node (per partition chain) and
//     never two in flight. Ordering none: no per-device limit, markers ignored.
//   - Device window (Config.DeviceWindow > 1, per_device only): up to that
//     many of a device's messages in flight, consecutive in append order and
//     all with the member that holds the first; any failure among them
//     stops the device until none is in flight, then it starts again from
//     its oldest unfinished message (devwindow.go).
//   - Move markers: a data message whose MoveRef names a marker is not
//     dispatched before that marker is passed (it reached the head of its
//     device's queue in its partition). A marker at or below the window
//     base (e.g. below the committed offset the group started from) is
//     passed; a marker in a partition the group does not read is treated as
//     passed.
//   - Credit: a delivery takes one credit of its member, an ack, nak, term,
//     expiry or leave returns it; a member never gets a message while its
//     in-flight count is at or above its credit.
//   - Redelivery: a nak redelivers (after its delay), an ack_wait expiry
//     redelivers to another member where one with credit > 0 exists, a
//     member leaving returns its messages to the head of their device
//     queues. A message that fails after Config.MaxDeliver deliveries is
//     dead-lettered, as is a termed one. Each Delivery carries its count;
//     an acknowledgement with another count, another member or for a
//     finished message is stale: ignored, counted, ErrStale.
//   - Offsets: per partition the committed offset is the highest one below
//     which everything is finished; completion out of order is normal. The
//     window is bounded, so one stuck message stops reading of its partition
//     after ReadAheadMsgs more offsets (until ack_wait moves it along).
//   - Device share (OrderPerDevice): one device holds at most
//     Config.DeviceShareMsgs / DeviceShareBytes of a partition's window;
//     its further records are set aside (unfinished, not held: the commit
//     stays below them) and read again when its share has room, so a device
//     with a backlog does not stall the others of its partition.
//   - Read-ahead budget (SetBudget, budget.go): a cap on what the group
//     holds, split among its partitions, on top of the windows; a
//     partition at its share reads nothing more until acks make room, one
//     holding nothing always takes a record, and one where a device waits
//     for its move marker reads on within its window. It changes how far
//     ahead the group reads, never what goes out next. ReleaseDelivered
//     drops a delivered record's bytes; the runner reads it again if it
//     must go out again.
//   - Drain: stop reading; deliver nothing above the highest offset
//     delivered in each partition but what is unfinished below it (so the
//     final commits cover every delivery), wait for in-flight messages
//     until the deadline, emit the final commits and Drained. Withdraw (a
//     deposed leader): deliver nothing more, wait, commit, Drained.
//
// # Bounds
//
// Every table is bounded: entries and per-device state by the sum of the
// partitions' ReadAheadMsgs (a device is tracked only while it has an
// unfinished fetched message), members by MaxMembers, partitions by
// MaxPartitions, ready queues and the timer heap by the entries. In steady
// state the group allocates nothing per message.
package queue
