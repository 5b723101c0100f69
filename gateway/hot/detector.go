// Package hot detects hot devices on the ingest side: a device whose rate over
// a sliding window exceeds Factor times the average device rate of its
// partition, and at least MinRate, is hot and should move to an isolation
// partition; it cools down when its rate falls below half of both thresholds
// (hysteresis, so a device near the line does not flap between partitions).
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
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Window: 10 * time.Second, Factor: 10, MinRate: 50, MaxDevices: 100_000, MaxHot: 64}
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
	if len(errs) > 0 {
		return fmt.Errorf("hot: %w", errors.Join(errs...))
	}
	return nil
}

// Move is a decision: send Device to its isolation partition (Hot) or home.
type Move struct {
	Device string
	Hot    bool
	Rate   float64 // msgs/s over the window when decided
}

// device is one tracked device: counts of the current and the previous window
// slot, which together give a sliding-window rate.
type device struct {
	home      int
	cur, prev uint32
	hot       bool
	rate      float64
}

// Detector tracks device rates. Not safe for concurrent use: the node guards it.
type Detector struct {
	cfg       Config
	devices   map[string]*device // bounded by cfg.MaxDevices
	slotStart time.Time          // start of the current window slot
	hotCount  int
	untracked uint64
	moves     []Move
}

// New returns a detector; it panics on nothing and validates cfg.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Detector{cfg: cfg, devices: make(map[string]*device)}, nil
}

// Restore marks devices that are already isolated (from the log's routing
// after a restart), so that they can cool down and move back.
func (d *Detector) Restore(device string, home int) {
	if dv := d.track(device, home); dv != nil && !dv.hot {
		dv.hot = true
		d.hotCount++
	}
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
			d.hotCount++
			d.moves = append(d.moves, Move{Device: id, Hot: true, Rate: dv.rate})
		case dv.hot && (dv.rate < d.cfg.MinRate/2 || (others > 0 && dv.rate < d.cfg.Factor/2*avg)):
			dv.hot = false
			d.hotCount--
			d.moves = append(d.moves, Move{Device: id, Hot: false, Rate: dv.rate})
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
}

// Stats returns the counters.
func (d *Detector) Stats() Stats {
	return Stats{Tracked: len(d.devices), Hot: d.hotCount, Untracked: d.untracked}
}
