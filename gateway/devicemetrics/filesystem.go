package devicemetrics

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// filesystemCollector reports the size and free space of the filesystem that
// holds the data directory (statfs), so an operator sees ENOSPC coming before
// ingest starts failing.
type filesystemCollector struct {
	dataDir string
	statfs  func(path string, st *unix.Statfs_t) error
}

var _ Collector = filesystemCollector{}

func (filesystemCollector) Name() string { return "filesystem" }

func (c filesystemCollector) Collect(dst []Sample) ([]Sample, error) {
	var st unix.Statfs_t
	if err := c.statfs(c.dataDir, &st); err != nil {
		return dst, fmt.Errorf("statfs data dir %s: %w", c.dataDir, err)
	}
	return appendFilesystemSamples(dst, &st), nil
}

// appendFilesystemSamples turns a statfs result into samples. Block counts
// are in units of the fragment size (f_frsize), as df computes them; Bsize
// is only the preferred I/O size, used when a filesystem leaves Frsize 0.
// The conversions go through uint64 because the field types differ between
// 32- and 64-bit Linux ports.
func appendFilesystemSamples(dst []Sample, st *unix.Statfs_t) []Sample {
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return append(dst,
		gauge("edgeq_device_filesystem_size_bytes",
			"Size of the filesystem holding the data directory.", float64(uint64(st.Blocks)*unit)),
		gauge("edgeq_device_filesystem_free_bytes",
			"Free bytes of the data directory's filesystem, including blocks reserved for root.", float64(uint64(st.Bfree)*unit)),
		gauge("edgeq_device_filesystem_avail_bytes",
			"Bytes of the data directory's filesystem available to unprivileged users; writes fail with ENOSPC near 0.", float64(uint64(st.Bavail)*unit)),
	)
}
