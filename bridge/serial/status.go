package serial

import "edgeq/gateway/apiv1"

// Status is one port's state for /v1/status: the API's document.
type Status = apiv1.SerialStatus

// Status returns a snapshot; safe to call at any time.
func (p *Port) Status() Status {
	p.mu.Lock()
	st := p.state
	p.mu.Unlock()
	opens := p.opens.Load()
	return Status{
		Name:          p.cfg.Name,
		Path:          p.cfg.Path,
		ResolvedPath:  st.resolved,
		Open:          st.open,
		LastError:     st.lastErr,
		LastErrorTime: st.lastErrTime,
		BytesIn:       p.bytesIn.Load(),
		FramesIn:      p.framesIn.Load(),
		Stored:        p.stored.Load(),
		Dropped:       p.dropped.snapshot(),
		StorageErrors: p.storageErrors.Load(),
		Pending:       p.outstanding.Load(),
		Opens:         opens,
		Reopens:       max(opens, 1) - 1,
		OpenFailures:  p.openFailures.Load(),
		FDRefusals:    p.fdRefusals.Load(),
		StorageWaits:  p.storageWaits.Load(),
	}
}
