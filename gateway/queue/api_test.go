package queue

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestGroup(t *testing.T, cfg Config, start map[int]uint64) *Group {
	t.Helper()
	g, err := New(cfg, start, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Deliver = DeliverAll
	return cfg
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		ok     bool
	}{
		{"defaults", func(*Config) {}, true},
		{"unknown ordering", func(c *Config) { c.Ordering = 9 }, false},
		{"unknown strategy", func(c *Config) { c.Strategy = 9 }, false},
		{"unknown deliver", func(c *Config) { c.Deliver = 9 }, false},
		{"zero max_in_flight", func(c *Config) { c.MaxInFlight = 0 }, false},
		{"zero ack_wait", func(c *Config) { c.AckWait = 0 }, false},
		{"zero max_deliver", func(c *Config) { c.MaxDeliver = 0 }, false},
		{"negative nak delay cap", func(c *Config) { c.MaxNakDelay = -1 }, false},
		{"zero nak delay cap", func(c *Config) { c.MaxNakDelay = 0 }, true},
		{"zero read-ahead", func(c *Config) { c.ReadAheadMsgs = 0 }, false},
		{"huge read-ahead", func(c *Config) { c.ReadAheadMsgs = MaxReadAheadMsgs + 1 }, false},
		{"largest read-ahead", func(c *Config) { c.ReadAheadMsgs = MaxReadAheadMsgs }, true},
		{"zero read-ahead bytes", func(c *Config) { c.ReadAheadBytes = 0 }, false},
		{"device share above the window", func(c *Config) { c.DeviceShareMsgs = c.ReadAheadMsgs + 1 }, false},
		{"device share of the whole window", func(c *Config) { c.DeviceShareMsgs = c.ReadAheadMsgs }, true},
		{"negative device share bytes", func(c *Config) { c.DeviceShareBytes = -1 }, false},
		{"zero aside devices", func(c *Config) { c.MaxAsideDevices = 0 }, false},
		{"zero members", func(c *Config) { c.MaxMembers = 0 }, false},
		{"zero partitions", func(c *Config) { c.MaxPartitions = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	for _, o := range []Ordering{OrderPerDevice, OrderNone} {
		if got, err := ParseOrdering(o.String()); err != nil || got != o {
			t.Errorf("ParseOrdering(%q) = %v, %v", o, got, err)
		}
	}
	for _, s := range []Strategy{StrategyRandom, StrategySticky} {
		if got, err := ParseStrategy(s.String()); err != nil || got != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s, got, err)
		}
	}
	for _, d := range []DeliverPolicy{DeliverNew, DeliverAll} {
		if got, err := ParseDeliverPolicy(d.String()); err != nil || got != d {
			t.Errorf("ParseDeliverPolicy(%q) = %v, %v", d, got, err)
		}
	}
	for _, bad := range []string{"", "PER_DEVICE", "fifo"} {
		if _, err := ParseOrdering(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseOrdering(%q) = %v", bad, err)
		}
		if _, err := ParseStrategy(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseStrategy(%q) = %v", bad, err)
		}
		if _, err := ParseDeliverPolicy(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseDeliverPolicy(%q) = %v", bad, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	bad := DefaultConfig()
	bad.AckWait = 0
	few := DefaultConfig()
	few.MaxPartitions = 1
	tests := []struct {
		name  string
		cfg   Config
		start map[int]uint64
		rng   Rand
		want  error
	}{
		{"invalid config", bad, nil, rand.New(rand.NewPCG(1, 1)), ErrInvalidConfig},
		{"nil rand", DefaultConfig(), nil, nil, ErrNilRand},
		{"too many partitions", few, map[int]uint64{0: 1, 1: 1}, rand.New(rand.NewPCG(1, 1)), ErrTooManyPartitions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, tt.start, tt.rng); !errors.Is(err, tt.want) {
				t.Fatalf("New() = %v, want %v", err, tt.want)
			}
		})
	}
}

// fetchOf returns the Fetch a Ready carries for partition p.
func fetchOf(t *testing.T, rd Ready, p int) Fetch {
	t.Helper()
	for _, f := range rd.Fetch {
		if f.Partition == p {
			return f
		}
	}
	t.Fatalf("no fetch for p%d in %+v", p, rd.Fetch)
	return Fetch{}
}

func data(p int, off uint64, dev string) Msg {
	return Msg{Partition: p, Offset: off, Kind: KindData, Device: dev, Data: []byte("x")}
}

func TestFetchedRejectsMalformedAnswers(t *testing.T) {
	tests := []struct {
		name string
		msgs []Msg
		next uint64
	}{
		{"next before the request", nil, 4},
		{"record before the request", []Msg{data(0, 4, "a")}, 9},
		{"offsets not ascending", []Msg{data(0, 6, "a"), data(0, 5, "a")}, 9},
		{"duplicate offset", []Msg{data(0, 5, "a"), data(0, 5, "a")}, 9},
		{"record at next", []Msg{data(0, 5, "a")}, 5},
		{"record of another partition", []Msg{data(1, 5, "a")}, 9},
		{"unknown kind", []Msg{{Partition: 0, Offset: 5, Kind: 7}}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGroup(t, testConfig(), map[int]uint64{0: 5})
			fetchOf(t, g.Ready(), 0)
			if err := g.Fetched(0, tt.msgs, tt.next, t0); !errors.Is(err, ErrBadBatch) {
				t.Fatalf("Fetched() = %v, want ErrBadBatch", err)
			}
			// The answer is ignored and the partition is read again from the same place.
			if f := fetchOf(t, g.Ready(), 0); f.From != 5 {
				t.Fatalf("refetch from %d, want 5", f.From)
			}
			if s := g.Stats(); s.Fetched != 0 || s.Partitions[0].Next != 5 {
				t.Fatalf("a rejected answer changed the state: %+v", s)
			}
		})
	}
}

func TestFetchedWithoutFetch(t *testing.T) {
	g := newTestGroup(t, testConfig(), map[int]uint64{0: 1})
	if err := g.Fetched(0, nil, 1, t0); !errors.Is(err, ErrNoFetch) {
		t.Fatalf("Fetched before any Fetch = %v, want ErrNoFetch", err)
	}
	g.Ready()
	if err := g.Fetched(3, nil, 1, t0); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("Fetched of unknown partition = %v, want ErrUnknownPartition", err)
	}
	if err := g.Fetched(0, nil, 1, t0); err != nil {
		t.Fatal(err)
	}
	if err := g.Fetched(0, nil, 1, t0); !errors.Is(err, ErrNoFetch) {
		t.Fatalf("second answer = %v, want ErrNoFetch", err)
	}
}

func TestRefetchedWithoutRefetch(t *testing.T) {
	g := newTestGroup(t, testConfig(), map[int]uint64{0: 1})
	g.Ready() // an ordinary Fetch is outstanding, no Refetch
	if err := g.Refetched(0, nil, 1, t0); !errors.Is(err, ErrNoFetch) {
		t.Fatalf("Refetched without a Refetch = %v, want ErrNoFetch", err)
	}
	if err := g.Refetched(3, nil, 1, t0); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("Refetched of unknown partition = %v, want ErrUnknownPartition", err)
	}
	if err := g.Fetched(0, nil, 1, t0); err != nil {
		t.Fatalf("the ordinary Fetch is still outstanding: %v", err)
	}
}

func TestFetchedEndAnswerWithRecords(t *testing.T) {
	cfg := testConfig()
	cfg.Deliver = DeliverNew
	g := newTestGroup(t, cfg, map[int]uint64{0: 0})
	if f := fetchOf(t, g.Ready(), 0); !f.End {
		t.Fatalf("deliver new without a position: want an End fetch, got %+v", f)
	}
	if err := g.Fetched(0, []Msg{data(0, 1, "a")}, 2, t0); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("End answer with records = %v, want ErrBadBatch", err)
	}
	if f := fetchOf(t, g.Ready(), 0); !f.End {
		t.Fatalf("after a bad End answer: want another End fetch, got %+v", f)
	}
}

// A runner that returns more than asked: the group takes only what fits its window.
func TestFetchedTakesOnlyWhatFits(t *testing.T) {
	cfg := testConfig()
	cfg.ReadAheadMsgs = 3
	g := newTestGroup(t, cfg, map[int]uint64{0: 1})
	g.Ready()
	msgs := []Msg{data(0, 1, "a"), data(0, 2, "b"), data(0, 3, "c"), data(0, 4, "d"), data(0, 5, "e")}
	if err := g.Fetched(0, msgs, 6, t0); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.Fetched != 3 || s.Partitions[0].Next != 4 {
		t.Fatalf("took %d records, next %d; want 3 and 4", s.Fetched, s.Partitions[0].Next)
	}
}

func TestAddPartition(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPartitions = 2
	g := newTestGroup(t, cfg, map[int]uint64{0: 1})
	if err := g.AddPartition(0, 1); !errors.Is(err, ErrPartitionExists) {
		t.Fatalf("AddPartition(existing) = %v", err)
	}
	if err := g.AddPartition(100, 7); err != nil {
		t.Fatal(err)
	}
	if err := g.AddPartition(101, 1); !errors.Is(err, ErrTooManyPartitions) {
		t.Fatalf("AddPartition beyond MaxPartitions = %v", err)
	}
	if f := fetchOf(t, g.Ready(), 100); f.From != 7 {
		t.Fatalf("new partition fetched from %d, want 7", f.From)
	}
}

func TestMemberInputErrors(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMembers = 1
	g := newTestGroup(t, cfg, nil)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"negative credit", func() error { return g.AddMember("m", -2, t0) }, ErrBadCredit},
		{"first member", func() error { return g.AddMember("m", 1, t0) }, nil},
		{"duplicate", func() error { return g.AddMember("m", 1, t0) }, ErrMemberExists},
		{"too many", func() error { return g.AddMember("n", 1, t0) }, ErrTooManyMembers},
		{"set negative credit", func() error { return g.SetCredit("m", -1, t0) }, ErrBadCredit},
		{"set credit of stranger", func() error { return g.SetCredit("x", 1, t0) }, ErrUnknownMember},
		{"remove stranger", func() error { return g.RemoveMember("x", t0) }, ErrUnknownMember},
		{"ack from stranger", func() error { return g.Ack("x", Ref{0, 1}, 1, t0) }, ErrStale},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}

// Ready's slices stay valid until the next Ready, so the runner can ack
// while it walks the deliveries.
func TestReadyStaysValidUntilNextReady(t *testing.T) {
	g := newTestGroup(t, testConfig(), map[int]uint64{0: 1})
	if err := g.AddMember("m", 10, t0); err != nil {
		t.Fatal(err)
	}
	g.Ready()
	msgs := []Msg{data(0, 1, "a"), data(0, 2, "a"), data(0, 3, "b"), data(0, 4, "b")}
	if err := g.Fetched(0, msgs, 5, t0); err != nil {
		t.Fatal(err)
	}
	rd := g.Ready()
	want := []Ref{{0, 1}, {0, 3}}
	if len(rd.Deliver) != len(want) {
		t.Fatalf("got %d deliveries, want %d", len(rd.Deliver), len(want))
	}
	for i, d := range rd.Deliver {
		if err := g.Ack(d.Member, d.Msg.Ref(), d.Deliveries, t0); err != nil {
			t.Fatal(err)
		}
		if got := rd.Deliver[i].Msg.Ref(); got != want[i] {
			t.Fatalf("delivery %d changed under the runner: %v, want %v", i, got, want[i])
		}
	}
	next := g.Ready()
	if len(next.Deliver) != 2 || next.Deliver[0].Msg.Offset != 2 || next.Deliver[1].Msg.Offset != 4 {
		t.Fatalf("after the acks: %+v", next.Deliver)
	}
}

func TestNextDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.AckWait = 10 * time.Second
	g := newTestGroup(t, cfg, map[int]uint64{0: 1})
	if _, ok := g.NextDeadline(); ok {
		t.Fatal("an idle group has a deadline")
	}
	if err := g.AddMember("m", 1, t0); err != nil {
		t.Fatal(err)
	}
	g.Ready()
	if err := g.Fetched(0, []Msg{data(0, 1, "a")}, 2, t0); err != nil {
		t.Fatal(err)
	}
	if d, ok := g.NextDeadline(); !ok || !d.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want the ack deadline", d, ok)
	}
	if err := g.Drain(t0.Add(3*time.Second), t0); err != nil {
		t.Fatal(err)
	}
	if d, ok := g.NextDeadline(); !ok || !d.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want the earlier drain deadline", d, ok)
	}
	if err := g.Tick(t0.Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if !g.Ready().Drained {
		t.Fatal("the drain deadline passed without Drained")
	}
	if _, ok := g.NextDeadline(); ok {
		t.Fatal("a drained group has a deadline")
	}
}

func TestDrainedGroupRejectsInput(t *testing.T) {
	g := newTestGroup(t, testConfig(), map[int]uint64{0: 1})
	if err := g.AddMember("m", 1, t0); err != nil {
		t.Fatal(err)
	}
	if err := g.Drain(t0, t0); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"AddMember":    func() error { return g.AddMember("n", 1, t0) },
		"RemoveMember": func() error { return g.RemoveMember("m", t0) },
		"SetCredit":    func() error { return g.SetCredit("m", 2, t0) },
		"Fetched":      func() error { return g.Fetched(0, nil, 1, t0) },
		"Ack":          func() error { return g.Ack("m", Ref{0, 1}, 1, t0) },
		"Nak":          func() error { return g.Nak("m", Ref{0, 1}, 1, 0, t0) },
		"InProgress":   func() error { return g.InProgress("m", Ref{0, 1}, 1, t0) },
		"Term":         func() error { return g.Term("m", Ref{0, 1}, 1, t0) },
		"Tick":         func() error { return g.Tick(t0) },
		"Drain":        func() error { return g.Drain(t0, t0) },
		"AddPartition": func() error { return g.AddPartition(5, 1) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrDrained) {
			t.Errorf("%s after drain = %v, want ErrDrained", name, err)
		}
	}
}

// A MoveRef into the message's own partition cannot name its marker (markers
// live in the partition the device left); it must not block the device.
func TestMoveRefIntoOwnPartitionDoesNotBlock(t *testing.T) {
	g := newTestGroup(t, testConfig(), map[int]uint64{0: 1})
	if err := g.AddMember("m", 1, t0); err != nil {
		t.Fatal(err)
	}
	g.Ready()
	m := data(0, 1, "a")
	m.MoveRef = Ref{Partition: 0, Offset: 2}
	if err := g.Fetched(0, []Msg{m, data(0, 2, "a")}, 3, t0); err != nil {
		t.Fatal(err)
	}
	if rd := g.Ready(); len(rd.Deliver) != 1 || rd.Deliver[0].Msg.Offset != 1 {
		t.Fatalf("want p0@1 delivered, got %+v", rd.Deliver)
	}
}
