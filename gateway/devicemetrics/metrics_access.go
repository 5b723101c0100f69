package devicemetrics

import "golang.org/x/sys/unix"

// FakeSystem replaces what the collectors read from the live machine rather
// than from a file under ProcRoot or SysRoot: statfs of the data directory,
// the block device holding it, and the page size. It exists so that an
// exposition layer in another package can run the collectors on fixtures
// (testdata/proc, testdata/sys) and get byte-identical output on any
// machine. Zero fields keep the real calls.
type FakeSystem struct {
	Statfs   func(path string, st *unix.Statfs_t) error
	DeviceOf func(path string) (major, minor uint32, err error)
	PageSize int
}

// NewCollectorsOn is NewCollectors with the live-machine calls of fake.
func NewCollectorsOn(cfg Config, fake FakeSystem) ([]Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sys := realSystem()
	if fake.Statfs != nil {
		sys.statfs = fake.Statfs
	}
	if fake.DeviceOf != nil {
		sys.deviceOf = fake.DeviceOf
	}
	if fake.PageSize > 0 {
		sys.pageSize = fake.PageSize
	}
	return newCollectors(cfg.withDefaults(), sys), nil
}
