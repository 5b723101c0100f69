package hot

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"edgeq/internal/scripttest"
)

// Scenario scripts under testdata (format in internal/scripttest) for the
// detector's decisions, the move back in particular. `go test -run
// TestScenarios -rewrite` regenerates the expected output.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// hotPart is the simulated isolation partition every hot device moves to.
const hotPart = 8

// harness plays the node: devices publish at set rates (all in home
// partition 0), a hot device's records are appended to partition 8, and
// the queue groups finish partition 8 at a set rate (the committed floor).
type harness struct {
	det     *Detector
	epoch   time.Time
	now     time.Time
	rates   map[string]float64
	acc     map[string]float64
	end     uint64  // last offset of the hot partition
	floor   float64 // committed floor of the hot partition
	consume float64 // msgs/s the groups finish in the hot partition
	groups  bool
	out     strings.Builder
}

func (h *harness) printf(format string, args ...any) { fmt.Fprintf(&h.out, format+"\n", args...) }

func (h *harness) run(line string) string {
	h.out.Reset()
	fields := strings.Fields(line)
	args := map[string]string{}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		}
	}
	if err := h.exec(fields[0], fields[1:], args); err != nil {
		h.printf("error: %v", err)
	}
	return h.out.String()
}

func (h *harness) exec(cmd string, pos []string, args map[string]string) error {
	if h.det == nil && cmd != "new" {
		return fmt.Errorf("no detector: start with new")
	}
	switch cmd {
	case "new":
		cfg := DefaultConfig()
		for k, v := range args {
			var err error
			switch k {
			case "move_back_backlog":
				cfg.MoveBackBacklog, err = strconv.Atoi(v)
			case "window":
				cfg.Window, err = time.ParseDuration(v)
			default:
				return fmt.Errorf("new: unknown option %q", k)
			}
			if err != nil {
				return err
			}
		}
		det, err := New(cfg)
		if err != nil {
			return err
		}
		h.det = det
		h.epoch = time.Unix(1_000_000, 0)
		h.now = h.epoch
		h.rates, h.acc = map[string]float64{}, map[string]float64{}
		h.end, h.floor, h.consume, h.groups = 0, 0, 0, true
	case "rate": // rate dev=msgs/s ...; a name ending in * sets devices name00..nameNN (count=N)
		for k, v := range args {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return err
			}
			if prefix, ok := strings.CutSuffix(k, "*"); ok {
				for i := 0; i < 10; i++ {
					h.rates[fmt.Sprintf("%s%02d", prefix, i)] = r
				}
				continue
			}
			h.rates[k] = r
		}
	case "consume": // the groups finish this many msgs/s of the hot partition
		r, err := strconv.ParseFloat(pos[0], 64)
		if err != nil {
			return err
		}
		h.consume = r
	case "nogroups":
		h.groups = false
	case "run":
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			return err
		}
		h.advance(d)
	case "stats":
		s := h.det.Stats()
		h.printf("tracked %d, hot %d, held back %d; hot partition end %d, committed %d",
			s.Tracked, s.Hot, s.HeldBack, h.end, uint64(h.floor))
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// advance runs the clock in 100 ms steps and evaluates once a second,
// printing every move.
func (h *harness) advance(d time.Duration) {
	devs := make([]string, 0, len(h.rates))
	for dev := range h.rates {
		devs = append(devs, dev)
	}
	slices.Sort(devs)
	for step := time.Duration(0); step < d; step += 100 * time.Millisecond {
		h.now = h.now.Add(100 * time.Millisecond)
		for _, dev := range devs {
			h.acc[dev] += h.rates[dev] / 10
			for h.acc[dev] >= 1 {
				h.acc[dev]--
				h.det.Observe(dev, 0, h.now)
				if dv := h.det.devices[dev]; dv != nil && dv.hot {
					h.end++
					h.det.Stored(dev, hotPart, h.end)
				}
			}
		}
		h.floor = min(h.floor+h.consume/10, float64(h.end))
		if h.now.Sub(h.epoch)%time.Second != 0 {
			continue
		}
		h.det.Committed(hotPart, uint64(h.floor), h.groups)
		for _, m := range h.det.Evaluate(h.now) {
			if m.Hot {
				h.printf("+%v %s -> hot partition (rate %.0f/s)", h.now.Sub(h.epoch), m.Device, m.Rate)
			} else {
				h.printf("+%v %s -> home (rate %.0f/s, backlog %d)", h.now.Sub(h.epoch), m.Device, m.Rate, m.Backlog)
			}
		}
	}
}

func TestScenarios(t *testing.T) {
	scripttest.Run(t, "testdata", func() scripttest.Harness { return (&harness{}).run }, *rewrite, nil)
}

func TestScenariosDeterministic(t *testing.T) {
	scripttest.Deterministic(t, "testdata", func() scripttest.Harness { return (&harness{}).run })
}
