package queue

// Delivery asks the runner to push Msg to Member.
type Delivery struct {
	Member MemberID
	Msg    Msg
	// Deliveries counts the deliveries of this message in this group
	// instance, 1 on the first. The member sends it back with its ack so a
	// late ack of an earlier attempt is recognised as stale.
	Deliveries int
}

// Fetch asks the runner to read partition Partition from offset From: at
// most MaxMsgs records and, after the first, at most MaxBytes of Data. The
// runner answers with exactly one Fetched call for it. It may hold the
// request until records are durable (long poll); there is never more than
// one Fetch outstanding per partition.
type Fetch struct {
	Partition int
	From      uint64
	MaxMsgs   int
	MaxBytes  int
	// End: the group has no position in this partition and starts after its
	// last record (deliver: new). Answer at once with Fetched(Partition, nil,
	// next) where next is the offset the next appended record will get.
	End bool
	// Refetch: read again records the group set aside (a device beyond its
	// share of the window, see Config.DeviceShareMsgs). They are durable:
	// answer at once, without waiting for new records, with Refetched (not
	// Fetched). At most one Refetch per partition is outstanding, besides
	// the ordinary Fetch.
	Refetch bool
}

// Commit tells the runner that every record of Partition up to and
// including Offset is finished; the group restarts from Offset+1.
type Commit struct {
	Partition int
	Offset    uint64
}

// DeadReason says why a message was dead-lettered.
type DeadReason uint8

const (
	// ReasonTerm: a member terminated the message.
	ReasonTerm DeadReason = iota + 1
	// ReasonMaxDeliver: the message failed again after Config.MaxDeliver deliveries.
	ReasonMaxDeliver
)

func (r DeadReason) String() string {
	switch r {
	case ReasonTerm:
		return "term"
	case ReasonMaxDeliver:
		return "max_deliver"
	}
	return "unknown"
}

// DeadLetter asks the runner to publish Msg on the group's dead-letter
// subject. The core already counts the message as finished.
type DeadLetter struct {
	Msg        Msg
	Reason     DeadReason
	Deliveries int
}

// Ready holds the actions produced since the previous call of Group.Ready.
// Handle them in this order: DeadLetter, Deliver, Fetch, Commit, Drained
// (see the package comment for why).
type Ready struct {
	DeadLetter []DeadLetter
	Deliver    []Delivery
	Fetch      []Fetch
	Commit     []Commit
	// Drained: the hand-over is complete; the final commits are in Commit.
	// The group accepts no further input.
	Drained bool
}

// Empty reports whether rd holds no action.
func (rd *Ready) Empty() bool {
	return len(rd.DeadLetter) == 0 && len(rd.Deliver) == 0 && len(rd.Fetch) == 0 &&
		len(rd.Commit) == 0 && !rd.Drained
}

// reset empties rd for reuse, dropping references to message data.
func (rd *Ready) reset() {
	clear(rd.DeadLetter)
	clear(rd.Deliver)
	rd.DeadLetter = rd.DeadLetter[:0]
	rd.Deliver = rd.Deliver[:0]
	rd.Fetch = rd.Fetch[:0]
	rd.Commit = rd.Commit[:0]
	rd.Drained = false
}

// Ready returns the actions produced since the previous call and adds the
// Fetch and Commit actions due now: they are computed here, so a batch of
// inputs coalesces into at most one of each per partition. The returned
// slices stay valid until the next call of Ready; the group reuses them, so
// steady state does not allocate.
func (g *Group) Ready() Ready {
	out := &g.out[g.cur]
	g.collectFetches(out)
	g.collectCommits(out)
	if g.drainedPending {
		out.Drained = true
		g.drainedPending = false
	}
	rd := *out
	g.cur ^= 1
	g.out[g.cur].reset()
	return rd
}

// HasReady reports whether Ready would return any action.
func (g *Group) HasReady() bool {
	out := &g.out[g.cur]
	if len(out.DeadLetter) > 0 || len(out.Deliver) > 0 || g.drainedPending {
		return true
	}
	for i := range g.parts {
		if g.fetchDue(&g.parts[i]) || g.parts[i].commitDue() || g.refetchDue(int32(i)) >= 0 {
			return true
		}
	}
	return false
}
