package devicemetrics

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Limits on the configurable bounds, so a typo cannot make a scrape unbounded.
const (
	maxInterfacesLimit   = 1024
	maxThermalZonesLimit = 1024
)

// Config says where the collectors read from. Zero values mean the defaults
// of DefaultConfig.
type Config struct {
	// ProcRoot is the procfs mount point. Default "/proc".
	ProcRoot string
	// SysRoot is the sysfs mount point. Default "/sys".
	SysRoot string
	// DataDir is edgeq's data directory. Its filesystem (statfs) and its
	// block device (disk I/O) are reported. Empty disables the filesystem and
	// disk collectors.
	DataDir string
	// PID is the process whose RSS, CPU time and fds are reported.
	// 0 means this process (<ProcRoot>/self). Default 0.
	PID int
	// MaxInterfaces bounds the network interfaces reported; when there are
	// more, the busiest (rx+tx bytes) are kept. Default 32.
	MaxInterfaces int
	// MaxThermalZones bounds the thermal zones reported, lowest zone numbers
	// first. Default 32.
	MaxThermalZones int
}

// DefaultConfig returns the configuration for the real /proc and /sys, this
// process, and no data directory.
func DefaultConfig() Config {
	return Config{
		ProcRoot:        "/proc",
		SysRoot:         "/sys",
		MaxInterfaces:   32,
		MaxThermalZones: 32,
	}
}

// withDefaults fills zero fields from DefaultConfig without touching the
// caller's value.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ProcRoot == "" {
		c.ProcRoot = d.ProcRoot
	}
	if c.SysRoot == "" {
		c.SysRoot = d.SysRoot
	}
	if c.MaxInterfaces == 0 {
		c.MaxInterfaces = d.MaxInterfaces
	}
	if c.MaxThermalZones == 0 {
		c.MaxThermalZones = d.MaxThermalZones
	}
	return c
}

// ErrInvalidConfig is wrapped by every error of Validate.
var ErrInvalidConfig = errors.New("invalid device metrics config")

// Validate reports a configuration NewCollectors would refuse. Zero values
// are valid (they mean the defaults).
func (c Config) Validate() error {
	var errs []error
	if c.PID < 0 {
		errs = append(errs, fmt.Errorf("%w: pid %d is negative", ErrInvalidConfig, c.PID))
	}
	if c.MaxInterfaces < 0 || c.MaxInterfaces > maxInterfacesLimit {
		errs = append(errs, fmt.Errorf("%w: max interfaces %d is outside 0..%d", ErrInvalidConfig, c.MaxInterfaces, maxInterfacesLimit))
	}
	if c.MaxThermalZones < 0 || c.MaxThermalZones > maxThermalZonesLimit {
		errs = append(errs, fmt.Errorf("%w: max thermal zones %d is outside 0..%d", ErrInvalidConfig, c.MaxThermalZones, maxThermalZonesLimit))
	}
	return errors.Join(errs...)
}

// NewCollectors returns the collectors for cfg in a fixed order: cpu, load,
// memory, uptime, process, thermal, network, and, when DataDir is set,
// filesystem and disk. It does not touch the filesystem: a missing root or
// data directory shows up as a failing collector at collect time, so it is
// reported on every scrape rather than once at start-up.
func NewCollectors(cfg Config) ([]Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newCollectors(cfg.withDefaults(), realSystem()), nil
}

// system holds the calls that read the live machine rather than a file under
// a root, so tests on fixtures can replace them.
type system struct {
	statfs   func(path string, st *unix.Statfs_t) error
	deviceOf func(path string) (major, minor uint32, err error)
	pageSize int
}

func realSystem() system {
	return system{
		statfs:   unix.Statfs,
		deviceOf: deviceNumberOf,
		pageSize: os.Getpagesize(),
	}
}

func newCollectors(cfg Config, sys system) []Collector {
	cs := []Collector{
		cpuCollector{procRoot: cfg.ProcRoot},
		loadCollector{procRoot: cfg.ProcRoot},
		memoryCollector{procRoot: cfg.ProcRoot},
		uptimeCollector{procRoot: cfg.ProcRoot},
		processCollector{procRoot: cfg.ProcRoot, pid: cfg.PID, pageSize: sys.pageSize},
		thermalCollector{sysRoot: cfg.SysRoot, maxZones: cfg.MaxThermalZones},
		networkCollector{procRoot: cfg.ProcRoot, maxInterfaces: cfg.MaxInterfaces},
	}
	if cfg.DataDir != "" {
		cs = append(cs,
			filesystemCollector{dataDir: cfg.DataDir, statfs: sys.statfs},
			diskCollector{procRoot: cfg.ProcRoot, sysRoot: cfg.SysRoot, dataDir: cfg.DataDir, deviceOf: sys.deviceOf},
		)
	}
	return cs
}
