// Package hot detects hot devices on the ingest side: a device whose rate over
// a sliding window exceeds Factor times the average device rate of its
// partition, and at least MinRate, is hot and should move to an isolation
// partition; it cools down when its rate falls below half of both thresholds
// (hysteresis, so a device near the line does not flap between partitions).
//
// A cooled device moves back home only when that cannot block its home
// partition: its records still waiting in the hot partition (its backlog)
// are at most MoveBackBacklog, and it has been hot for at least one Window.
// Its next records at home wait behind the move marker until that backlog is
// delivered, so moving back with a large one would hold them in the home
// partition's window. The backlog is input: Stored reports each record the
// device appended to its hot partition, Committed the lowest offset every
// queue group has finished there.
//
// Detector is a pure state machine: Observe counts, Evaluate decides, and time
// is always a parameter. It starts no goroutines and touches no files; the node
// calls Evaluate about once per second and performs the moves it returns.
package hot

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Config configures detection.
type Config struct {
	// Window is the sliding window the rates are measured over (default 10s).
	Window time.Duration
	// Factor: hot above Factor × the partition's average device rate (default 10).
	Factor float64
	// MinRate: a device below this many msgs/s is never hot (default 50).
	MinRate float64
	// MaxDevices bounds the devices tracked (default 100,000); beyond it new
	// devices are not tracked (counted in Stats.Untracked).
	MaxDevices int
	// MaxHot bounds how many devices may be isolated at once (default 64).
	MaxHot int
	// MoveBackBacklog: a cooled device moves home only once at most this
	// many of its records wait in the hot partition (default 32).
	MoveBackBacklog int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Window: 10 * time.Second, Factor: 10, MinRate: 50, MaxDevices: 100_000, MaxHot: 64, MoveBackBacklog: 32}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Window < time.Second {
		errs = append(errs, fmt.Errorf("window %v, want >= 1s", c.Window))
	}
	if c.Factor <= 1 {
		errs = append(errs, fmt.Errorf("factor %v, want > 1", c.Factor))
	}
	if c.MinRate <= 0 {
		errs = append(errs, fmt.Errorf("min_rate %v, want > 0", c.MinRate))
	}
	if c.MaxDevices < 1 || c.MaxHot < 0 {
		errs = append(errs, fmt.Errorf("max_devices %d / max_hot %d out of range", c.MaxDevices, c.MaxHot))
	}
	if c.MoveBackBacklog < 0 {
		errs = append(errs, fmt.Errorf("move_back_backlog %d, want >= 0", c.MoveBackBacklog))
	}
	if len(errs) > 0 {
		return fmt.Errorf("hot: %w", errors.Join(errs...))
	}
	return nil
}

// Move is a decision: send Device to its isolation partition (Hot) or home.
type Move struct {
	Device  string
	Hot     bool
	Rate    float64 // msgs/s over the window when decided
	Backlog uint64  // moving home: its records still waiting in the hot partition
}

// device is one tracked device: counts of the current and the previous window
// slot, which together give a sliding-window rate.
type device struct {
	home      int
	cur, prev uint32
	hot       bool
	rate      float64
	hotSince  time.Time // when it last became hot (zero: restored, or never)
	stored    stored    // its records in its hot partition, while hot
}

// Detector tracks device rates. Not safe for concurrent use: the node guards it.
type Detector struct {
	cfg       Config
	devices   map[string]*device // bounded by cfg.MaxDevices
	slotStart time.Time          // start of the current window slot
	hotCount  int
	untracked uint64
	heldBack  uint64         // evaluations that kept a cooled device hot for its backlog
	floors    map[int]uint64 // per hot partition: lowest offset every group finished; bound: the node's partitions
	moves     []Move
}

// New returns a detector; it panics on nothing and validates cfg.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Detector{cfg: cfg, devices: make(map[string]*device), floors: make(map[int]uint64)}, nil
}

// Restore marks devices that are already isolated (from the log's routing
// after a restart), so that they can cool down and move back. hotPartition
// is where the device is and end its last offset: which of the records up
// to end are the device's is not known, so they all count as its backlog
// until every group has finished them.
func (d *Detector) Restore(device string, home, hotPartition int, end uint64) {
	if dv := d.track(device, home); dv != nil && !dv.hot {
		dv.hot = true
		d.hotCount++
		dv.stored = stored{part: hotPartition}
		if end > 0 {
			dv.stored.add(end, end)
		}
	}
}

// Stored reports that device appended the record at offset to partition,
// a hot partition (the node reports the appends of isolated devices).
func (d *Detector) Stored(device string, partition int, offset uint64) {
	dv, ok := d.devices[device]
	if !ok || !dv.hot {
		return
	}
	if dv.stored.part != partition {
		dv.stored = stored{part: partition}
	}
	dv.stored.add(offset, 1)
}

// Committed reports the lowest offset of a hot partition that every queue
// group has finished (ok false: no group reads it, so nothing waits there).
func (d *Detector) Committed(partition int, offset uint64, ok bool) {
	if !ok {
		offset = ^uint64(0)
	}
	d.floors[partition] = offset
}

// backlog is how many of dv's records in its hot partition no group has
// finished yet (an upper bound).
func (d *Detector) backlog(dv *device) uint64 {
	floor, known := d.floors[dv.stored.part]
	if !known {
		floor = 0
	}
	return dv.stored.after(floor)
}

// Observe counts one message of device, whose home partition is home.
func (d *Detector) Observe(device string, home int, now time.Time) {
	d.roll(now)
	if dv := d.track(device, home); dv != nil {
		dv.cur++
	}
}

func (d *Detector) track(id string, home int) *device {
	if dv, ok := d.devices[id]; ok {
		return dv
	}
	if len(d.devices) >= d.cfg.MaxDevices {
		d.untracked++
		return nil
	}
	dv := &device{home: home}
	d.devices[id] = dv
	return dv
}

// roll advances the window slots: a slot is one Window long; the rate is the
// previous slot's count weighted by how much of it still overlaps the sliding
// window, plus the current slot's count.
func (d *Detector) roll(now time.Time) {
	if d.slotStart.IsZero() {
		d.slotStart = now
		return
	}
	elapsed := now.Sub(d.slotStart)
	if elapsed < d.cfg.Window {
		return
	}
	slots := int(elapsed / d.cfg.Window)
	for _, dv := range d.devices {
		if slots == 1 {
			dv.prev, dv.cur = dv.cur, 0
		} else {
			dv.prev, dv.cur = 0, 0
		}
	}
	d.slotStart = d.slotStart.Add(time.Duration(slots) * d.cfg.Window)
}

func (d *Detector) rate(dv *device, now time.Time) float64 {
	frac := float64(now.Sub(d.slotStart)) / float64(d.cfg.Window)
	if frac > 1 {
		frac = 1
	}
	return (float64(dv.prev)*(1-frac) + float64(dv.cur)) / d.cfg.Window.Seconds()
}

// Evaluate decides which devices become hot or cool down. The returned slice is
// reused by the next call. Devices idle for two windows are forgotten unless
// isolated.
func (d *Detector) Evaluate(now time.Time) []Move {
	d.roll(now)
	d.moves = d.moves[:0]
	type agg struct {
		sum   float64
		count int
	}
	parts := map[int]*agg{}
	for id, dv := range d.devices {
		dv.rate = d.rate(dv, now)
		if dv.rate == 0 && !dv.hot {
			delete(d.devices, id)
			continue
		}
		a := parts[dv.home]
		if a == nil {
			a = &agg{}
			parts[dv.home] = a
		}
		a.sum += dv.rate
		a.count++
	}
	for id, dv := range d.devices {
		a := parts[dv.home]
		if a == nil || a.count == 0 {
			continue
		}
		// The average of the other devices: a lone device cannot be hot
		// against itself.
		others := a.count - 1
		avg := 0.0
		if others > 0 {
			avg = (a.sum - dv.rate) / float64(others)
		}
		switch {
		case !dv.hot && others > 0 && dv.rate >= d.cfg.MinRate && dv.rate > d.cfg.Factor*avg && d.hotCount < d.cfg.MaxHot:
			dv.hot = true
			dv.hotSince = now
			dv.stored = stored{part: -1}
			d.hotCount++
			d.moves = append(d.moves, Move{Device: id, Hot: true, Rate: dv.rate})
		case dv.hot && (dv.rate < d.cfg.MinRate/2 || (others > 0 && dv.rate < d.cfg.Factor/2*avg)):
			if now.Sub(dv.hotSince) < d.cfg.Window {
				continue // hot for less than a window: no flapping
			}
			backlog := d.backlog(dv)
			if backlog > uint64(d.cfg.MoveBackBacklog) {
				d.heldBack++
				continue // its records at home would wait behind this backlog
			}
			dv.hot = false
			dv.stored = stored{}
			d.hotCount--
			d.moves = append(d.moves, Move{Device: id, Hot: false, Rate: dv.rate, Backlog: backlog})
		}
	}
	// Deterministic order for callers and tests.
	sort.Slice(d.moves, func(i, j int) bool { return d.moves[i].Device < d.moves[j].Device })
	return d.moves
}

// Undo reverts a decision the node could not carry out (the move failed), so
// that the next Evaluate may try again.
func (d *Detector) Undo(m Move) {
	dv, ok := d.devices[m.Device]
	if !ok || dv.hot != m.Hot {
		return
	}
	dv.hot = !m.Hot
	if m.Hot {
		d.hotCount--
	} else {
		d.hotCount++
	}
}

// DeviceRate is one entry of Top.
type DeviceRate struct {
	Device string
	Rate   float64
	Hot    bool
}

// Stats are the detector's counters.
type Stats struct {
	Tracked, Hot int
	Untracked    uint64
	// HeldBack counts evaluations that kept a cooled device in its hot
	// partition because its backlog there was above MoveBackBacklog.
	HeldBack uint64
}

// Stats returns the counters.
func (d *Detector) Stats() Stats {
	return Stats{Tracked: len(d.devices), Hot: d.hotCount, Untracked: d.untracked, HeldBack: d.heldBack}
}

// maxMarks bounds the marks kept per isolated device.
const maxMarks = 32

// stored tracks an isolated device's records in its hot partition: total
// so far, and marks (offset, count of its records at or below that offset),
// ascending. When the marks are full every other one is dropped (the last
// is kept), so the count below a floor between two marks is rounded down:
// the backlog is an upper bound, exact once the floor passes the last mark.
type stored struct {
	part  int
	total uint64
	marks []mark
}

type mark struct{ off, count uint64 }

func (s *stored) add(off, n uint64) {
	s.total += n
	if len(s.marks) == maxMarks {
		k := 0
		for i := 0; i < len(s.marks); i += 2 {
			s.marks[k] = s.marks[i]
			k++
		}
		s.marks = s.marks[:k]
	}
	s.marks = append(s.marks, mark{off: off, count: s.total})
}

// after returns how many of the records may be above floor, and forgets
// the marks below the last one at or below floor.
func (s *stored) after(floor uint64) uint64 {
	i := len(s.marks) - 1
	for i >= 0 && s.marks[i].off > floor {
		i--
	}
	if i < 0 {
		return s.total
	}
	if i > 0 {
		s.marks = append(s.marks[:0], s.marks[i:]...)
	}
	return s.total - s.marks[0].count
}
