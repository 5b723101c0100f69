package election

// Persist asks the runner to store Epoch as the highest seen for Group,
// durably (write, fsync), before it acts on anything else in the same Ready.
// A Ready holds at most one Persist per group, the latest.
type Persist struct {
	Group string
	Epoch Epoch
}

// ChangeKind says what a Change asks of the runner.
type ChangeKind uint8

const (
	// BecomeLeader: start leading Group at Epoch (pull partitions, push to
	// members, commit offsets), sending Epoch with every fetch and commit.
	BecomeLeader ChangeKind = iota + 1
	// StepDown: stop leading Group at Epoch. With HandOver set, drain (finish
	// or hand back in-flight work, emit final commits, within a deadline
	// shorter than Config.HandOverTimeout) and then call Drained(Group,
	// Epoch) so the successor may start; without it the leadership is
	// already lost (a newer epoch exists, or the group was removed): stop at
	// once, owners refuse this epoch anyway. A later BecomeLeader of the same
	// group may arrive while a drain still runs: finish or abort the drain
	// before leading again.
	StepDown
)

func (k ChangeKind) String() string {
	switch k {
	case BecomeLeader:
		return "lead"
	case StepDown:
		return "step-down"
	}
	return "unknown"
}

// Change is a change of this node's leadership of one group.
type Change struct {
	Kind     ChangeKind
	Group    string
	Epoch    Epoch
	HandOver bool // StepDown only: call Drained when drained
}

// Ready holds the work produced since the previous call of Machine.Ready.
//
// The runner handles it in this order:
//
//  1. Persist: store every epoch durably (fsync) BEFORE anything below. A
//     COORDINATOR or a leadership must never carry an epoch that a crash
//     could forget: after a restart the node would pick it again, and a
//     partition owner would accept a stale leader again.
//  2. Changes, in order: stop leading (StepDown) or start (BecomeLeader).
//     One group may step down and lead again in one Ready; keep the order.
//  3. Messages: send them (best effort; losing one is not an error).
//
// The same duty applies to Fence: a request that Fence accepted is served
// only after the Persist of the Ready that follows it is durable.
type Ready struct {
	Persist  []Persist
	Changes  []Change
	Messages []Message
}

// Empty reports whether rd holds no work.
func (rd *Ready) Empty() bool {
	return len(rd.Persist) == 0 && len(rd.Changes) == 0 && len(rd.Messages) == 0
}
