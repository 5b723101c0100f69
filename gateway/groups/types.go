package groups

import "edgeq/gateway/queue"

// The vocabulary of groups' API. Front ends, uplinks, the cluster layer and
// the configuration name members, group policies and statistics with these
// names and import only groups: gateway/queue, the pure core behind them,
// is this package's business.
//
// They are aliases of the core's types, not copies: the core decides with
// exactly these values (a member ID, an ack wait, a deliver policy), so a
// copy would be converted field by field on every call for nothing. The
// seam is the import graph (no package but groups, and the metrics that
// read its statistics, imports gateway/queue), not a second set of types.
type (
	// MemberID names one member of a group. A front end picks it for its
	// subscription; Registry.Join returns the ID the group knows it by
	// (AckHandle.Member).
	MemberID = queue.MemberID

	// CoreConfig is a group's delivery policy: ordering, member choice,
	// where a new group starts, credit, ack wait, redelivery limits and
	// read-ahead bounds. Start from DefaultCoreConfig; the registry checks
	// it when the group is made. Its Filter is the registry's (set from the
	// group's subject filter).
	CoreConfig = queue.Config

	// Ordering says how many records of one device may be in flight.
	Ordering = queue.Ordering
	// Strategy picks a member among those with credit.
	Strategy = queue.Strategy
	// DeliverPolicy says where a group without committed offsets starts.
	DeliverPolicy = queue.DeliverPolicy

	// CoreStats is a snapshot of a group's delivery (GroupStats.Core).
	CoreStats = queue.Stats
	// PartitionStats is one partition of CoreStats: its offsets and window.
	PartitionStats = queue.PartitionStats
	// MemberStats is one member of CoreStats: its credit and what it holds.
	MemberStats = queue.MemberStats
)

// The values of CoreConfig's policies (see gateway/queue for each).
const (
	OrderPerDevice = queue.OrderPerDevice // at most one record per device in flight (default)
	OrderNone      = queue.OrderNone      // no per-device limit

	StrategyRandom = queue.StrategyRandom // a random member with credit (default)
	StrategySticky = queue.StrategySticky // a device stays with one member

	DeliverNew = queue.DeliverNew // start after what is stored (default)
	DeliverAll = queue.DeliverAll // start at the oldest stored record
)

// DefaultCoreConfig returns the documented defaults of a group's policy.
func DefaultCoreConfig() CoreConfig { return queue.DefaultConfig() }
