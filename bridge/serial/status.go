package serial

import "time"

// Status is one port's state for /v1/status.
type Status struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// ResolvedPath is the device the path pointed at when last opened.
	ResolvedPath  string    `json:"resolved_path,omitempty"`
	Open          bool      `json:"open"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorTime time.Time `json:"last_error_time,omitzero"`
	BytesIn       uint64    `json:"bytes_in"`
	// FramesIn counts every frame cut from the stream: FramesIn = Stored +
	// StorageErrors + the sum of Dropped + Pending.
	FramesIn      uint64            `json:"frames_in"`
	Stored        uint64            `json:"stored"`
	Dropped       map[string]uint64 `json:"dropped"`
	StorageErrors uint64            `json:"storage_errors"`
	Pending       int64             `json:"pending"`
	Opens         uint64            `json:"opens"`
	Reopens       uint64            `json:"reopens"`
	OpenFailures  uint64            `json:"open_failures"`
	// FDRefusals counts opens refused because the port's fds were >= 1024.
	FDRefusals uint64 `json:"fd_refusals"`
	// StorageWaits counts frames that waited for a free append slot.
	StorageWaits uint64 `json:"storage_waits"`
}

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
