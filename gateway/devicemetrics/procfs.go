package devicemetrics

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// openProcFS opens procfs at root on every collect, so a root that is missing
// at start-up is reported as a failing collector, not a construction error.
// It costs a stat and a statfs.
func openProcFS(root string) (procfs.FS, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return procfs.FS{}, fmt.Errorf("open procfs at %s: %w", root, err)
	}
	return fs, nil
}
