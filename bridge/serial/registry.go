package serial

import (
	"fmt"
	"sync"
)

// maxClaims bounds each registry map: far more ports than a gateway has.
const maxClaims = 1024

// registry records which Port holds a path in this process: TIOCEXCL does
// not stop a second open by root, and flock does not stop one within the
// process when the same Port is misconfigured twice.
type registry struct {
	mu         sync.Mutex
	configured map[string]string // cleaned configured path → port name, from Start to the end of run
	open       map[string]string // resolved device path → port name, while open
}

var claims = registry{configured: map[string]string{}, open: map[string]string{}}

func (r *registry) claim(m map[string]string, key, owner, what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if holder, ok := m[key]; ok {
		return fmt.Errorf("%w: %s %s is held by serial[%s]", ErrPortInUse, what, key, holder)
	}
	if len(m) >= maxClaims {
		return fmt.Errorf("%w: more than %d ports", ErrPortInUse, maxClaims)
	}
	m[key] = owner
	return nil
}

func (r *registry) release(m map[string]string, key, owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m[key] == owner {
		delete(m, key)
	}
}

func (r *registry) claimConfigured(path, owner string) error {
	return r.claim(r.configured, path, owner, "path")
}

func (r *registry) releaseConfigured(path, owner string) { r.release(r.configured, path, owner) }

func (r *registry) claimOpen(device, owner string) error {
	return r.claim(r.open, device, owner, "device")
}

func (r *registry) releaseOpen(device, owner string) { r.release(r.open, device, owner) }

// openBy returns the port holding device open, if any.
func (r *registry) openBy(device string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	owner, ok := r.open[device]
	return owner, ok
}
