package readahead

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestNewRejects(t *testing.T) {
	for _, c := range []struct{ total, floor int64 }{{0, 0}, {-1, 0}, {10, -1}, {10, 11}} {
		if _, err := New(c.total, c.floor); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%d, %d) = %v, want ErrInvalid", c.total, c.floor, err)
		}
	}
}

// TestGrants walks groups joining, holding, lagging and leaving.
func TestGrants(t *testing.T) {
	type step struct {
		op    string // join, leave, report
		id    int
		used  int64
		grant int64 // report: the grant expected
	}
	cases := []struct {
		name         string
		total, floor int64
		steps        []step
	}{
		{"one group takes the whole budget", 1000, 10, []step{
			{"join", 1, 0, 0},
			{"report", 1, 0, 1000},
			{"report", 1, 990, 1000},
			{"report", 1, 1200, 1000}, // over (one record beyond): no more
		}},
		{"equal shares", 1000, 10, []step{
			{"join", 1, 0, 0}, {"join", 2, 0, 0}, {"join", 3, 0, 0}, {"join", 4, 0, 0},
			{"report", 1, 0, 250},
			{"report", 2, 250, 250},
			{"report", 3, 100, 250},
		}},
		{"a lagging group keeps what it holds, takes nothing more, the newcomer grows into what is free", 1000, 10, []step{
			{"join", 1, 0, 0},
			{"report", 1, 1000, 1000}, // lagging: holds the whole budget
			{"join", 2, 0, 0},
			{"report", 2, 0, 10},     // nothing free: the floor
			{"report", 1, 1000, 500}, // over its share now
			{"report", 1, 700, 500},  // acks came: still over
			{"report", 2, 10, 300},   // grows into what is free: 10 + (1000-710)
			{"report", 1, 400, 500},  // under its share again
			{"report", 2, 500, 500},  // its share
			{"leave", 1, 0, 0},
			{"report", 2, 500, 1000}, // alone again
		}},
		{"the floor when the shares are small", 100, 20, []step{
			{"join", 1, 0, 0}, {"join", 2, 0, 0}, {"join", 3, 0, 0}, {"join", 4, 0, 0}, {"join", 5, 0, 0}, {"join", 6, 0, 0},
			{"report", 1, 0, 20},
			{"report", 6, 20, 20},
		}},
		{"report joins", 300, 0, []step{
			{"report", 7, 50, 300},
			{"join", 7, 0, 0}, // joining again keeps what it holds
			{"report", 8, 0, 150},
			{"report", 7, 50, 150},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(c.total, c.floor)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range c.steps {
				switch s.op {
				case "join":
					b.Join(s.id)
				case "leave":
					b.Leave(s.id)
				case "report":
					if got := b.Report(s.id, s.used); got != s.grant {
						t.Fatalf("step %d: report(%d, %d) = %d, want %d (stats %+v)", i, s.id, s.used, got, s.grant, b.Stats())
					}
				}
			}
		})
	}
}

// TestRandomStaysWithinBudget: groups that each hold what they are granted
// (and sometimes release some) never hold together more than total + groups
// × floor, once the groups that held more before a join are under their
// share; every group's grant is at least the floor; Stats.Used is the sum.
func TestRandomStaysWithinBudget(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		total := int64(1 + rng.IntN(1<<20))
		floor := int64(rng.IntN(int(total/8) + 1))
		b, err := New(total, floor)
		if err != nil {
			t.Fatal(err)
		}
		used := map[int]int64{}
		for step := range 2000 {
			id := rng.IntN(12)
			switch r := rng.IntN(10); {
			case r == 0:
				b.Leave(id)
				delete(used, id)
			case r < 4: // acks release some
				used[id] /= 2
				b.Report(id, used[id])
			default: // reads up to the grant
				g := b.Report(id, used[id])
				if g < floor {
					t.Fatalf("seed %d step %d: grant %d below the floor %d", seed, step, g, floor)
				}
				if g > used[id] {
					used[id] = g
					b.Report(id, g)
				}
			}
			var sum int64
			for _, u := range used {
				sum += u
			}
			s := b.Stats()
			if s.Used != sum || s.Groups != len(used) {
				t.Fatalf("seed %d step %d: stats %+v, want used %d over %d groups", seed, step, s, sum, len(used))
			}
			if s.Over == 0 && sum > total+int64(len(used))*floor {
				t.Fatalf("seed %d step %d: groups hold %d, budget %d + %d × floor %d", seed, step, sum, total, len(used), floor)
			}
		}
	}
}

func TestSharedIsSafe(t *testing.T) {
	s, err := NewShared(1<<20, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for id := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			s.Join(id)
			for i := range 1000 {
				s.Report(id, int64(i))
			}
			s.Leave(id)
		}()
	}
	for range 8 {
		<-done
	}
	if st := s.Stats(); st.Used != 0 || st.Groups != 0 {
		t.Fatalf("after every group left: %+v", st)
	}
}
