package cluster

import (
	"context"
	"edgeq/internal/fsutil"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"edgeq/discovery/election"
)

// Leadership receives this node's leadership changes. Lead and StepDown are
// called from the elector's goroutine in the order the machine decides; a
// hand-over StepDown must eventually be answered with Elector.Drained.
type Leadership interface {
	Lead(group string, epoch election.Epoch)
	StepDown(group string, epoch election.Epoch, handOver bool)
}

// Elector runs the election machine: ticks, peer events and election frames
// in; epochs persisted (write, fsync, rename, fsync dir) BEFORE changes are
// applied and messages sent, as the machine's Ready contract requires.
type Elector struct {
	mgr    *Manager
	lead   Leadership
	path   string // epochs file
	tick   time.Duration
	logger *slog.Logger

	mu     sync.Mutex // guards m and epochs: the machine is not thread-safe
	m      *election.Machine
	epochs map[string]election.Epoch // highest persisted per group; bound: election MaxGroups
}

// ElectorConfig configures an Elector.
type ElectorConfig struct {
	Election election.Config
	// DataDir holds cluster-epochs.json.
	DataDir string
	// Tick is the length of one election tick (default 100ms).
	Tick   time.Duration
	Logger *slog.Logger
}

const epochsFile = "cluster-epochs.json"

// NewElector builds the machine with the epochs persisted earlier.
func NewElector(cfg ElectorConfig, mgr *Manager, lead Leadership) (*Elector, error) {
	m, err := election.New(cfg.Election)
	if err != nil {
		return nil, err
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Elector{mgr: mgr, lead: lead, path: filepath.Join(cfg.DataDir, epochsFile), tick: cfg.Tick,
		logger: cfg.Logger, m: m, epochs: map[string]election.Epoch{}}
	data, err := os.ReadFile(e.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("cluster: read epochs: %w", err)
	default:
		var stored map[string]string
		if err := json.Unmarshal(data, &stored); err != nil {
			return nil, fmt.Errorf("cluster: parse %s: %w", e.path, err)
		}
		for g, s := range stored {
			ep, err := election.ParseEpoch(s)
			if err != nil {
				return nil, fmt.Errorf("cluster: %s: group %q: %w", e.path, g, err)
			}
			e.epochs[g] = ep
		}
	}
	return e, nil
}

// AddGroup starts electing a leader for group, from its persisted epoch.
func (e *Elector) AddGroup(group string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.apply(e.m.AddGroup(group, e.epochs[group]))
}

// RemoveGroup stops electing for group (deleted): a leader steps down
// without a hand-over. An unknown group is no error.
func (e *Elector) RemoveGroup(group string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.apply(e.m.RemoveGroup(group))
	if errors.Is(err, election.ErrUnknownGroup) {
		return nil
	}
	return err
}

// PeerUp, PeerDown and Frame make the Elector a part of the peer Handler.
func (e *Elector) PeerUp(node string, priority int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logInput("peer up", node, e.apply(e.m.PeerUp(election.NodeID(node), priority)))
}

// PeerDown tells the machine a peer is gone.
func (e *Elector) PeerDown(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logInput("peer down", node, e.apply(e.m.PeerDown(election.NodeID(node))))
}

// Frame handles an election frame.
func (e *Elector) Frame(node string, f Frame) {
	if f.Type != TypeElection {
		return
	}
	msg, err := DecodeElection(f.Body)
	if err != nil || string(msg.From) != node {
		e.logger.Warn("bad election message", "peer", node, "err", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logInput("election message", node, e.apply(e.m.Step(msg)))
}

// Drained confirms a hand-over StepDown.
func (e *Elector) Drained(group string, epoch election.Epoch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logInput("drained", group, e.apply(e.m.Drained(group, epoch)))
}

// logInput reports an input the machine refused (a peer beyond the limit,
// a stale or malformed message): the protocol copes, an operator may not.
// Stale messages are normal traffic after a change of leader, messages for a
// group not added yet normal after a start: debug only.
func (e *Elector) logInput(what, who string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, election.ErrStaleEpoch), errors.Is(err, election.ErrUnknownGroup):
		// Unknown: a peer speaks of a group this node has not added yet
		// (it is still waiting for its peers after start, or has not
		// heard of the group): the election goes on without it.
		e.logger.Debug("election input refused", "input", what, "from", who, "err", err)
	default:
		e.logger.Warn("election input refused", "input", what, "from", who, "err", err)
	}
}

// Fence is the owner-side check of a leader's epoch (fetches and commits).
// Per the machine's contract the request is served only after the epochs it
// may have raised are persisted, which apply does before returning.
func (e *Elector) Fence(group string, epoch election.Epoch) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.m.Fence(group, epoch)
	if aerr := e.apply(nil); aerr != nil {
		return aerr
	}
	return err
}

// Leader reports the current leader of group.
func (e *Elector) Leader(group string) (string, election.Epoch, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ep, ok := e.m.Leader(group)
	return string(n), ep, ok
}

// Stats returns the machine's counters.
func (e *Elector) Stats() election.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m.Stats()
}

// GroupLeader is a group's current leader and epoch, as Leader reports it.
type GroupLeader struct {
	Group  string
	Leader string
	Epoch  election.Epoch
}

// Leaders reports the current leader of each of groups that has one (in
// the order of groups), and the machine's counters, taking the lock once.
func (e *Elector) Leaders(groups []string) ([]GroupLeader, election.Stats) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]GroupLeader, 0, len(groups))
	for _, g := range groups {
		if n, ep, ok := e.m.Leader(g); ok {
			out = append(out, GroupLeader{Group: g, Leader: string(n), Epoch: ep})
		}
	}
	return out, e.m.Stats()
}

// Run ticks the machine until ctx ends.
func (e *Elector) Run(ctx context.Context) {
	t := time.NewTicker(e.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.mu.Lock()
			e.m.Tick()
			_ = e.apply(nil)
			e.mu.Unlock()
		}
	}
}

// apply handles the machine's Ready in the required order: persist, then
// changes, then messages. Called with mu held; it returns inErr (the input's
// own error) or a persistence error, after which nothing is applied or sent.
func (e *Elector) apply(inErr error) error {
	for e.m.HasReady() {
		rd := e.m.Ready()
		if len(rd.Persist) > 0 {
			for _, p := range rd.Persist {
				e.epochs[p.Group] = p.Epoch
			}
			if err := e.persist(); err != nil {
				// Nothing of this Ready may go out with an epoch a crash could
				// forget; the machine re-announces on later ticks.
				e.logger.Error("persist election epochs", "err", err)
				return err
			}
		}
		for _, c := range rd.Changes {
			switch c.Kind {
			case election.BecomeLeader:
				e.lead.Lead(c.Group, c.Epoch)
			case election.StepDown:
				e.lead.StepDown(c.Group, c.Epoch, c.HandOver)
			}
		}
		for _, msg := range rd.Messages {
			// Best effort: a lost message is covered by timeouts and
			// periodic announcements.
			_ = e.mgr.Send(string(msg.To), TypeElection, AppendElection(nil, msg))
		}
	}
	return inErr
}

func (e *Elector) persist() error {
	stored := make(map[string]string, len(e.epochs))
	for g, ep := range e.epochs {
		stored[g] = ep.String()
	}
	data, err := json.MarshalIndent(stored, "", " ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(e.path, data, 0o640)
}
