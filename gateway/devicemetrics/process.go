package devicemetrics

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// processCollector reports RSS, CPU time and open file descriptors with their
// limit for one process: edgeq itself unless a pid is given (tests).
type processCollector struct {
	procRoot string
	pid      int // 0: <procRoot>/self
	pageSize int // bytes per page for RSS; 16 KiB on some arm64 kernels (Pi 5)
}

var _ Collector = processCollector{}

func (processCollector) Name() string { return "process" }

func (c processCollector) Collect(dst []Sample) ([]Sample, error) {
	fs, err := openProcFS(c.procRoot)
	if err != nil {
		return dst, err
	}
	p, err := c.proc(fs)
	if err != nil {
		return dst, err
	}
	st, err := p.Stat()
	if err != nil {
		return dst, fmt.Errorf("read stat of pid %d: %w", p.PID, err)
	}
	fds, err := p.FileDescriptorsLen()
	if err != nil {
		return dst, fmt.Errorf("count fds of pid %d: %w", p.PID, err)
	}
	limits, err := p.Limits()
	if err != nil {
		return dst, fmt.Errorf("read limits of pid %d: %w", p.PID, err)
	}
	// "unlimited" comes back as MaxUint64, reported as 1.8e19 rather than
	// left out: it is a real setting, and fds/limit is then ~0.
	return append(dst,
		gauge("edgeq_process_resident_memory_bytes", "Resident set size of the edgeq process.", float64(st.RSS)*float64(c.pageSize)),
		counter("edgeq_process_cpu_seconds_total", "User and system CPU seconds used by the edgeq process.", st.CPUTime()),
		gauge("edgeq_process_open_fds", "Open file descriptors of the edgeq process.", float64(fds)),
		gauge("edgeq_process_max_fds", "Soft limit on open file descriptors of the edgeq process (RLIMIT_NOFILE).", float64(limits.OpenFiles)),
	), nil
}

func (c processCollector) proc(fs procfs.FS) (procfs.Proc, error) {
	if c.pid == 0 {
		p, err := fs.Self()
		if err != nil {
			return procfs.Proc{}, fmt.Errorf("find own process under %s: %w", c.procRoot, err)
		}
		return p, nil
	}
	p, err := fs.Proc(c.pid)
	if err != nil {
		return procfs.Proc{}, fmt.Errorf("find pid %d under %s: %w", c.pid, c.procRoot, err)
	}
	return p, nil
}
