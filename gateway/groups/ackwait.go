package groups

import "time"

// AckWait is the ack_wait of group key, or the defaults' when the group
// does not exist.
func (r *Registry) AckWait(key GroupKey) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.groups[key]; g != nil {
		return g.cfg.Core.AckWait
	}
	return r.cfg.Defaults.AckWait
}
