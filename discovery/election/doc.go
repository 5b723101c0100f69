// Package election is the bully election of a leader per queue group: a
// pure, deterministic state machine per node, driven by ticks. It does no
// I/O, starts no goroutine, reads no clock and uses no randomness; a runner
// feeds it events and carries out the work it returns (see Ready).
//
// # Rank
//
// In each group the nodes are ordered by Rank: higher priority first, then
// the rendezvous hash of node ID and group (seeded xxhash64 over
// node + "\x00" + group), then node ID. Nodes of equal priority thus lead
// different groups, and leadership spreads over the cluster.
//
// # Protocol
//
// A node without a live leader for a group is a candidate: it sends
// ELECTION to every live peer and waits AnswerTimeout ticks. A higher-ranked
// peer replies ANSWER (the candidate then waits CoordinatorTimeout ticks for
// a COORDINATOR, or elects again); the sitting leader, of any rank, replies
// with its COORDINATOR. A candidate nobody answered becomes leader at a new
// epoch, persists it, and announces COORDINATOR to every peer. A leader
// repeats its COORDINATOR every AnnounceInterval ticks and to every peer
// that comes up. A follower whose leader goes down (PeerDown) elects; so
// does one that gets an ELECTION from its own leader (the leader restarted
// unnoticed).
//
// # Epochs and fencing
//
// An Epoch is a number and the leader's ID: a new leader takes one above
// the highest number it has seen, with its own ID. Epochs are ordered by
// number, then ID, so they are unique per leadership even when the two
// sides of a partition pick the same number, and a partition owner can
// tell such leaders apart. Every message carries the sender's highest
// epoch and every receiver adopts a newer one: a leader that sees a newer
// epoch steps down at once (StepDown without HandOver), and a COORDINATOR
// older than the highest seen is refused. Fence is the partition owner's
// check before it serves a fetch or commit: it refuses an epoch older than
// the highest seen and records a newer one. The highest epoch per group is
// persisted (Persist) before anything that depends on it is acted on, and
// a restarted node adds its groups with their persisted epochs, so epochs
// never go backwards on any node.
//
// # Safe hand-over
//
// A node that ranks above its group's leader and above every live peer
// does not simply start leading: it sends HANDOVER to the leader and waits.
// The leader steps down with HandOver, its runner drains, calls Drained,
// and the old leader answers DRAINED; only then does the new one lead, at
// the next epoch. A node that does not lead answers DRAINED at once. The
// new node stops waiting after HandOverTimeout ticks or when the old
// leader goes down, and leads anyway: the newer epoch then deposes the old
// leader and fences it out at the owners. The old leader likewise stops
// waiting for its drain after HandOverTimeout ticks.
//
// # The runner's duties
//
//   - Call Tick at a fixed interval; all timeouts are in ticks.
//   - Report membership from the failure detector: PeerUp (also for a
//     changed priority), PeerDown. Pass every election message received on
//     an authenticated peer connection to Step; errors mean "drop it".
//   - After each batch of inputs call Ready and carry it out in order:
//     Persist durably (fsync) first, then Changes, then send Messages.
//   - On StepDown with HandOver: drain within a deadline and call Drained.
//   - Before serving a fetch or commit from a leader: Fence, then carry out
//     the following Ready (its Persist) before serving.
//   - On restart: New, then AddGroup for each group with its persisted
//     epoch; keep a removed group's epoch in case it comes back.
//
// # Bounds
//
// Groups are bounded by Config.MaxGroups, live peers by Config.MaxPeers,
// names by MaxNameLen. Per group the machine keeps a fixed-size state; the
// work of one input is at most one message per peer and group.
package election
