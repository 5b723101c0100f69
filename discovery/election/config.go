package election

import "fmt"

// Config of one node's election machine. Timeouts are counted in ticks: the
// runner calls Tick at a fixed interval (e.g. every 100ms) and the machine
// never reads a clock. The zero value is not valid; start from DefaultConfig.
type Config struct {
	// ID is this node's ID. Required: no default.
	ID NodeID
	// Priority of this node: a higher priority leads before any hash
	// tie-break. Default 0.
	Priority int
	// AnswerTimeout is how long a candidate waits for an ANSWER from a
	// higher-ranked node before it wins. It is also the time a node that has
	// just started a group gives a sitting leader to announce itself, so it
	// should cover a message round trip. Default 3 ticks.
	AnswerTimeout int
	// CoordinatorTimeout is how long a candidate that got an ANSWER (or an
	// old leader that has handed over) waits for the COORDINATOR before it
	// starts a new election. It must exceed AnswerTimeout, since the node
	// that answered runs its own election first. Default 10 ticks.
	CoordinatorTimeout int
	// HandOverTimeout bounds a safe hand-over: how long a higher-ranked node
	// waits for the sitting leader to drain and confirm (DRAINED) before it
	// takes over anyway (the old leader may be dead; fencing then keeps it
	// out). The old leader waits as long for its runner's Drained. It should
	// exceed the runner's drain deadline. Default 50 ticks.
	HandOverTimeout int
	// AnnounceInterval is how often a leader repeats its COORDINATOR to every
	// peer, so a lost announcement, a stale leader on the other side of a
	// healed partition or a refused hand-over request is corrected within
	// one interval. Default 20 ticks.
	AnnounceInterval int
	// MaxGroups bounds the groups of the machine. Default 1024.
	MaxGroups int
	// MaxPeers bounds the peers that are up at once. Default 64.
	MaxPeers int
}

// DefaultConfig returns the documented defaults for node id.
func DefaultConfig(id NodeID) Config {
	return Config{
		ID:                 id,
		AnswerTimeout:      3,
		CoordinatorTimeout: 10,
		HandOverTimeout:    50,
		AnnounceInterval:   20,
		MaxGroups:          1024,
		MaxPeers:           64,
	}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	switch {
	case !validName(string(c.ID)):
		return fmt.Errorf("election: config: %w: %w: node id %q", ErrInvalidConfig, ErrBadName, c.ID)
	case c.AnswerTimeout < 1:
		return fmt.Errorf("election: config: %w: answer_timeout must be >= 1 tick, got %d", ErrInvalidConfig, c.AnswerTimeout)
	case c.CoordinatorTimeout <= c.AnswerTimeout:
		return fmt.Errorf("election: config: %w: coordinator_timeout (%d) must exceed answer_timeout (%d)", ErrInvalidConfig, c.CoordinatorTimeout, c.AnswerTimeout)
	case c.HandOverTimeout < 1:
		return fmt.Errorf("election: config: %w: hand_over_timeout must be >= 1 tick, got %d", ErrInvalidConfig, c.HandOverTimeout)
	case c.AnnounceInterval < 1:
		return fmt.Errorf("election: config: %w: announce_interval must be >= 1 tick, got %d", ErrInvalidConfig, c.AnnounceInterval)
	case c.MaxGroups < 1:
		return fmt.Errorf("election: config: %w: max_groups must be >= 1, got %d", ErrInvalidConfig, c.MaxGroups)
	case c.MaxPeers < 1:
		return fmt.Errorf("election: config: %w: max_peers must be >= 1, got %d", ErrInvalidConfig, c.MaxPeers)
	}
	return nil
}
