package queue

import (
	"fmt"
	"slices"
	"time"
)

// Group is the dispatch state machine of one queue group. It is not safe for
// concurrent use: one goroutine of the runner owns it.
type Group struct {
	cfg Config
	rng Rand
	// shareMsgs, shareBytes: the per-device share of a partition's window (aside.go).
	shareMsgs, shareBytes int
	// budget, perRecord: the read-ahead budget (budget.go); 0: none.
	budget, perRecord int
	// release: partitions whose delivered records drop Data (budget.go); nil: none.
	release      func(partition int) bool
	releasedCost int   // what a released record costs the budget
	window       int32 // Config.DeviceWindow in effect (devwindow.go)
	now          int64 // unix ns of the latest input

	parts   []partition
	partIdx map[int]int32 // partition ID -> index in parts; bound: Config.MaxPartitions

	entries     []entry // slab; bound: sum of the partitions' ReadAheadMsgs
	freeEntries int32

	devices     []device
	freeDevices []int32
	deviceIdx   map[string]int32 // device ID -> index in devices; bound: one per unfinished entry, so sum of ReadAheadMsgs

	members memberTable

	ready      entryQueue // random strategy: dispatchable messages
	redeliver  entryQueue // ack_wait expiries, waiting for a member other than the one that timed out
	unassigned entryQueue // sticky strategy: dispatchable messages while no member has credit > 0
	parked     entryQueue // dispatchable messages of paused partitions
	work       []int32    // sticky strategy: members that may deliver from their queue; bound: MaxMembers
	// gated lists devices whose lane heads all wait for a move marker (plus
	// stale indices of devices freed since), rebuilt at every fetch answer;
	// bound: the entry slab.
	gated, gatedSpare []int32

	timers []int32 // min-heap of entries by deadline; bound: the entry slab

	held           int // unfinished entries in the slab
	inFlight       int
	draining       bool
	withdrawing    bool // Withdraw: deliver nothing more while draining
	drained        bool
	drainedPending bool
	drainDeadline  int64

	out     [2]Ready // double buffer: one being filled, one handed out by Ready
	cur     int
	scratch []int32 // reused by rare bulk operations (rebalancing, member leave)
	// restarts: devices whose run ended while the member queues were
	// rebuilt (devwindow.go); bound: the device table.
	restarts []int32

	counters counters
}

// New builds a group that reads the partitions in start. start maps a
// partition ID to the next offset to read, i.e. committed offset + 1; 0
// means the group has no position there, and Config.Deliver decides where it
// begins. A nil start builds a group with no partitions (see AddPartition).
// rng drives member choice. New copies cfg and start and never modifies them.
func New(cfg Config, start map[int]uint64, rng Rand) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, fmt.Errorf("queue: new: %w", ErrNilRand)
	}
	if len(start) > cfg.MaxPartitions {
		return nil, fmt.Errorf("queue: new: %d partitions: %w (max %d)", len(start), ErrTooManyPartitions, cfg.MaxPartitions)
	}
	g := &Group{
		cfg:         cfg,
		rng:         rng,
		partIdx:     make(map[int]int32, len(start)),
		freeEntries: noEntry,
		deviceIdx:   make(map[string]int32),
		members:     newMemberTable(),
		ready:       newEntryQueue(),
		redeliver:   newEntryQueue(),
		unassigned:  newEntryQueue(),
		parked:      newEntryQueue(),
	}
	g.updateShares()
	g.window = g.cfg.deviceWindow()
	// Sorted, so the order of Fetch and Commit actions never depends on map iteration.
	ids := make([]int, 0, len(start))
	for id := range start {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g.addPartition(id, start[id])
	}
	return g, nil
}

// AddPartition starts reading one more partition, e.g. of a node that joined
// the cluster. next has the meaning of New's start values.
func (g *Group) AddPartition(partition int, next uint64) error {
	if g.drained {
		return fmt.Errorf("queue: add partition %d: %w", partition, ErrDrained)
	}
	if _, ok := g.partIdx[partition]; ok {
		return fmt.Errorf("queue: add partition %d: %w", partition, ErrPartitionExists)
	}
	if len(g.parts) >= g.cfg.MaxPartitions {
		return fmt.Errorf("queue: add partition %d: %w (max %d)", partition, ErrTooManyPartitions, g.cfg.MaxPartitions)
	}
	g.addPartition(partition, next)
	g.updateShares() // the budget's split changed
	return nil
}

func (g *Group) addPartition(id int, next uint64) {
	g.partIdx[id] = int32(len(g.parts))
	g.parts = append(g.parts, newPartition(id, next, &g.cfg))
}

func (g *Group) setNow(now time.Time) { g.now = now.UnixNano() }

// Pause stops (paused) or restarts delivering the messages of partition:
// messages already in flight stay with their members, the others wait in
// the window until it is resumed, each device still holding its place (no
// later message of a device goes out while one waits). Reading goes on as
// the runner answers fetches. A leader pauses the partitions of a node it
// cannot reach: if that node now leads the group alone on the other side of
// a network partition, the two sides do not deliver the same messages.
func (g *Group) Pause(partition int, paused bool, now time.Time) error {
	if g.drained {
		return fmt.Errorf("queue: pause partition %d: %w", partition, ErrDrained)
	}
	pi, ok := g.partIdx[partition]
	if !ok {
		return fmt.Errorf("queue: pause partition %d: %w", partition, ErrUnknownPartition)
	}
	p := &g.parts[pi]
	if p.paused == paused {
		return nil
	}
	g.setNow(now)
	p.paused = paused
	if paused {
		return nil
	}
	// Back to the ready queues in the order they were parked.
	keep := newEntryQueue()
	for g.parked.n > 0 {
		ei := g.qPop(&g.parked)
		if g.entries[ei].part == pi {
			g.pushReady(ei, false)
		} else {
			g.qPush(&keep, ei)
		}
	}
	g.parked = keep
	g.dispatch()
	return nil
}
