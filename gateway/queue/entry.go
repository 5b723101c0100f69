package queue

// noEntry marks an empty link or a finished window slot.
const noEntry int32 = -1

type entryState uint8

const (
	stFree     entryState = iota
	stWaiting             // in its device lane, behind the head or gated by a move marker
	stReady               // in a ready queue, waiting for a member with credit
	stInFlight            // delivered; in the timer heap with its ack deadline
	stDelayed             // nak'ed with a delay; in the timer heap with its release time
)

// entry is one fetched, unfinished record. Entries live in a slab and link
// to each other by index, so steady state allocates nothing. The slab holds
// at most the sum of the partitions' read-ahead windows.
type entry struct {
	msg        Msg
	state      entryState
	side       bool  // a re-read record, in its partition's side table rather than the ring
	follow     bool  // queued for the member that holds its device's run (devwindow.go)
	released   bool  // its Data and Body were dropped after delivery (ReleaseDelivered)
	part       int32 // index into Group.parts
	dev        int32 // index into Group.devices
	deliveries int32
	member     int32     // holder while in flight
	avoid      memberRef // member whose ack_wait expired; redelivery goes elsewhere where possible
	deadline   int64     // unix ns: ack deadline (in flight) or release time (delayed)
	heapIdx    int32
	laneNext   int32 // next entry of the same device lane
	queueNext  int32 // next entry in a ready queue or the free list
}

// entryQueue is an intrusive FIFO of entries linked by queueNext.
type entryQueue struct {
	head, tail int32
	n          int
}

func newEntryQueue() entryQueue { return entryQueue{head: noEntry, tail: noEntry} }

func (g *Group) allocEntry() int32 {
	if g.freeEntries != noEntry {
		ei := g.freeEntries
		g.freeEntries = g.entries[ei].queueNext
		return ei
	}
	g.entries = append(g.entries, entry{})
	return int32(len(g.entries) - 1)
}

func (g *Group) freeEntry(ei int32) {
	g.entries[ei] = entry{state: stFree, queueNext: g.freeEntries, heapIdx: -1}
	g.freeEntries = ei
}

func (g *Group) qPush(q *entryQueue, ei int32) {
	g.entries[ei].queueNext = noEntry
	if q.tail == noEntry {
		q.head = ei
	} else {
		g.entries[q.tail].queueNext = ei
	}
	q.tail = ei
	q.n++
}

func (g *Group) qPushFront(q *entryQueue, ei int32) {
	g.entries[ei].queueNext = q.head
	q.head = ei
	if q.tail == noEntry {
		q.tail = ei
	}
	q.n++
}

func (g *Group) qPop(q *entryQueue) int32 {
	ei := q.head
	q.head = g.entries[ei].queueNext
	if q.head == noEntry {
		q.tail = noEntry
	}
	g.entries[ei].queueNext = noEntry
	q.n--
	return ei
}
