package election

import "fmt"

// Accept reports whether a request (fetch, commit) carrying epoch may be
// served for group: the group is known and epoch is not older than the
// highest epoch this node has seen. It is a pure check; use Fence to also
// record a newer epoch.
func (m *Machine) Accept(group string, epoch Epoch) bool {
	g := m.groups[group]
	return g != nil && epoch.valid() && epoch.Compare(g.highest) >= 0
}

// Fence is the check a partition owner makes before serving a fetch or a
// commit from the leader of epoch: it refuses (ErrStaleEpoch) an epoch older
// than the highest it has seen, so a deposed leader that has not noticed yet
// cannot read or commit. A newer epoch is recorded (this node steps down if
// it led, and follows epoch's leader): the runner must make the Persist of
// the next Ready durable before it serves the request.
func (m *Machine) Fence(group string, epoch Epoch) error {
	g := m.groups[group]
	switch {
	case g == nil:
		return fmt.Errorf("election: fence %q: %w", group, ErrUnknownGroup)
	case !epoch.valid():
		return fmt.Errorf("election: fence %q: %w: %v", group, ErrBadEpoch, epoch)
	case epoch.Compare(g.highest) < 0:
		m.stats.Fenced++
		return fmt.Errorf("election: fence %q: %w: %v is older than %v", group, ErrStaleEpoch, epoch, g.highest)
	}
	if m.observe(g, epoch) {
		m.evaluate(g)
	}
	return nil
}
