package hot

import (
	"fmt"
	"testing"
	"time"
)

// feed sends rates (msgs/s per device) for d seconds in 100 ms steps and
// evaluates once per second, returning every move made.
func feed(det *Detector, now *time.Time, rates map[string]float64, secs int) []Move {
	var all []Move
	acc := map[string]float64{}
	for step := 0; step < secs*10; step++ {
		*now = now.Add(100 * time.Millisecond)
		for dev, r := range rates {
			acc[dev] += r / 10
			for acc[dev] >= 1 {
				det.Observe(dev, 0, *now)
				acc[dev]--
			}
		}
		if step%10 == 9 {
			all = append(all, det.Evaluate(*now)...)
		}
	}
	return all
}

func TestHotDeviceDetectedAndCools(t *testing.T) {
	det, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	rates := map[string]float64{}
	for i := 0; i < 20; i++ {
		rates[fmt.Sprintf("d%02d", i)] = 5
	}
	if moves := feed(det, &now, rates, 30); len(moves) != 0 {
		t.Fatalf("uniform load moved devices: %v", moves)
	}
	rates["d03"] = 200 // 40x the others
	moves := feed(det, &now, rates, 15)
	if len(moves) != 1 || moves[0].Device != "d03" || !moves[0].Hot {
		t.Fatalf("moves %v, want d03 hot", moves)
	}
	if top := det.Top(3); top[0].Device != "d03" || !top[0].Hot {
		t.Fatalf("top %v", top)
	}
	// Still hot: no flapping.
	if moves := feed(det, &now, rates, 30); len(moves) != 0 {
		t.Fatalf("hot device flapped: %v", moves)
	}
	rates["d03"] = 5
	moves = feed(det, &now, rates, 25)
	if len(moves) != 1 || moves[0].Device != "d03" || moves[0].Hot {
		t.Fatalf("moves %v, want d03 cooled", moves)
	}
	if s := det.Stats(); s.Hot != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestThresholds(t *testing.T) {
	cases := []struct {
		name    string
		hotRate float64
		others  float64
		wantHot bool
	}{
		{"below min_rate though 40x", 40, 1, false},
		{"above min_rate, only 5x", 250, 50, false},
		{"above both", 600, 50, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			det, _ := New(DefaultConfig())
			now := time.Unix(0, 0)
			rates := map[string]float64{"hot": c.hotRate}
			for i := 0; i < 10; i++ {
				rates[fmt.Sprintf("o%d", i)] = c.others
			}
			moves := feed(det, &now, rates, 25)
			if got := len(moves) == 1 && moves[0].Device == "hot"; got != c.wantHot {
				t.Fatalf("moves %v, want hot=%v", moves, c.wantHot)
			}
		})
	}
}

func TestLoneDeviceIsNeverHot(t *testing.T) {
	det, _ := New(DefaultConfig())
	now := time.Unix(0, 0)
	if moves := feed(det, &now, map[string]float64{"only": 1000}, 25); len(moves) != 0 {
		t.Fatalf("moves %v", moves)
	}
}

func TestBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxDevices = 12
	cfg.MaxHot = 1
	det, _ := New(cfg)
	now := time.Unix(0, 0)
	rates := map[string]float64{"h1": 500, "h2": 500}
	for i := 0; i < 15; i++ {
		rates[fmt.Sprintf("o%02d", i)] = 1
	}
	moves := feed(det, &now, rates, 25)
	hot := 0
	for _, m := range moves {
		if m.Hot {
			hot++
		}
	}
	if hot > 1 || det.Stats().Hot > 1 {
		t.Fatalf("%d hot devices, max_hot 1: %v", hot, moves)
	}
	if s := det.Stats(); s.Tracked > 12 || s.Untracked == 0 {
		t.Fatalf("stats %+v, want at most 12 tracked and some untracked", s)
	}
}

func TestIdleDevicesForgottenAndUndo(t *testing.T) {
	det, _ := New(DefaultConfig())
	now := time.Unix(0, 0)
	det.Observe("once", 0, now)
	now = now.Add(25 * time.Second)
	det.Evaluate(now)
	if det.Stats().Tracked != 0 {
		t.Fatalf("idle device kept: %+v", det.Stats())
	}
	det.Restore("iso", 0, 8, 0)
	if det.Stats().Hot != 1 {
		t.Fatal("restored device not hot")
	}
	moves := det.Evaluate(now.Add(time.Second))
	if len(moves) != 1 || moves[0].Hot {
		t.Fatalf("restored idle device should cool: %v", moves)
	}
	det.Undo(moves[0])
	if det.Stats().Hot != 1 {
		t.Fatal("undo did not restore hot state")
	}
}

// TestStoredBacklogBound: the backlog estimate is bounded in memory, never
// below the true count of records above the floor, and exact once the
// floor passes the last record.
func TestStoredBacklogBound(t *testing.T) {
	var s stored
	var offs []uint64
	off := uint64(0)
	for i := 0; i < 5000; i++ {
		off += 1 + uint64(i%7) // other devices' records in between
		offs = append(offs, off)
		s.add(off, 1)
		if len(s.marks) > maxMarks {
			t.Fatalf("%d marks, max %d", len(s.marks), maxMarks)
		}
	}
	for _, floor := range []uint64{0, 10, 1000, offs[2500], offs[4990], off - 1, off, off + 5} {
		exact := uint64(0)
		for _, o := range offs {
			if o > floor {
				exact++
			}
		}
		got := s.after(floor)
		if got < exact || (floor >= off && got != 0) {
			t.Errorf("floor %d: backlog %d, exact %d", floor, got, exact)
		}
	}
}
