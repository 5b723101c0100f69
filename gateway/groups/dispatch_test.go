package groups

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"edgeq/gateway/queue"
	"edgeq/gateway/subject"
	"edgeq/wal"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openLog(t testing.TB, dir string) *wal.Log {
	t.Helper()
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 4, 1
	o.FsyncInterval = 2 * time.Millisecond
	l, err := wal.Open(dir, o, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newRegistry(l *wal.Log, cfg queue.Config, deadLetters func(queue string, d *Delivery, reason string)) *Registry {
	return NewRegistry(Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: cfg, GroupTTL: time.Hour, MaxGroups: 8,
		DeadLetters: deadLetters}, l, quiet())
}

// join adds a member, failing the test on an error.
func join(t testing.TB, reg *Registry, key GroupKey, id string, m Member, credit int) {
	t.Helper()
	if _, err := reg.Join(key, queue.MemberID(id), m, credit); err != nil {
		t.Fatal(err)
	}
}

// answer is a test member's reply to a delivery: kind 0 never answers; a
// nak waits nakDelay before the redelivery; the reply comes after after.
type answer struct {
	kind     AckKind
	nakDelay time.Duration
	after    time.Duration
}

func ackAfter(d time.Duration) answer { return answer{kind: AckDone, after: d} }

// delivery is what a test member saw.
type delivery struct {
	member     string
	device     string
	seq        uint64
	deliveries int
	handle     AckHandle
	payload    string
}

// world checks the invariants members observe: never two messages of one
// device in flight, first deliveries in sequence order.
type world struct {
	t        testing.TB
	mu       sync.Mutex
	inFlight map[string]string // device -> member holding it
	firstSeq map[string]uint64 // last first-delivered seq per device
	seen     map[string]bool   // device/seq delivered at least once
	all      []delivery
	dupes    int
}

func newWorld(t testing.TB) *world {
	return &world{t: t, inFlight: map[string]string{}, firstSeq: map[string]uint64{}, seen: map[string]bool{}}
}

// member is an in-process queue member; its policy decides the answer.
type member struct {
	id     string
	w      *world
	reg    *Registry
	policy func(d delivery) answer
	wg     *sync.WaitGroup
}

func (m *member) Deliver(d *Delivery) bool {
	// The Delivery is only valid during the call: copy.
	dv := delivery{member: m.id, device: strings.Clone(d.Record.Device), seq: d.Record.Seq, deliveries: d.Deliveries,
		handle: d.Ack, payload: string(d.Record.Payload)}
	if d.Node != "n1" || d.Ack.Deliveries != d.Deliveries || d.Ack.Offset != d.Offset || d.Raw == nil {
		m.w.t.Errorf("delivery %+v: node, handle or raw record wrong", d)
	}
	// Count the answer before the delivery becomes visible to the test, so
	// that its wg.Wait never races this Add.
	m.wg.Add(1)
	m.w.enter(dv)
	ans := m.policy(dv)
	if ans.kind == 0 {
		// Never answers: the worker is not working on it either, and the
		// group redelivers after ack_wait.
		m.w.exit(dv)
		m.wg.Done()
		return true
	}
	go func() {
		defer m.wg.Done()
		time.Sleep(ans.after)
		m.w.exit(dv)
		if err := m.reg.Ack(Ack{Handle: dv.handle, Kind: ans.kind, Delay: ans.nakDelay}); err != nil {
			m.w.t.Errorf("ack %+v: %v", dv.handle, err)
		}
	}()
	return true
}

func (w *world) enter(d delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if holder, busy := w.inFlight[d.device]; busy {
		w.t.Errorf("device %s: seq %d delivered to %s while %s still holds one", d.device, d.seq, d.member, holder)
	}
	w.inFlight[d.device] = d.member
	key := fmt.Sprintf("%s/%d", d.device, d.seq)
	if w.seen[key] {
		w.dupes++
	} else {
		if d.seq != w.firstSeq[d.device]+1 {
			w.t.Errorf("device %s: first delivery of seq %d after seq %d", d.device, d.seq, w.firstSeq[d.device])
		}
		w.firstSeq[d.device] = d.seq
		w.seen[key] = true
	}
	w.all = append(w.all, d)
}

func (w *world) exit(d delivery) {
	w.mu.Lock()
	delete(w.inFlight, d.device)
	w.mu.Unlock()
}

func (w *world) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func publish(t testing.TB, l *wal.Log, devices, perDevice int) {
	t.Helper()
	var wg sync.WaitGroup
	for d := 0; d < devices; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			dev := fmt.Sprintf("dev-%d", d)
			for i := 0; i < perDevice; i++ {
				if _, err := l.Append(context.Background(), &wal.Record{Device: dev, Payload: []byte(fmt.Sprintf("%s#%d", dev, i+1))}); err != nil {
					t.Error(err)
					return
				}
			}
		}(d)
	}
	wg.Wait()
}

func TestOrderedDeliveryToCompetingMembers(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	reg := newRegistry(l, cfg, nil)
	w := newWorld(t)
	var wg sync.WaitGroup
	key := GroupKey{"telemetry.>", "workers"}
	for i := 0; i < 4; i++ {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		var mu sync.Mutex
		m := &member{id: fmt.Sprint(i), w: w, reg: reg, wg: &wg, policy: func(delivery) answer {
			mu.Lock()
			defer mu.Unlock()
			return ackAfter(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}}
		join(t, reg, key, fmt.Sprintf("m%d", i), m, 32)
	}
	const devices, per = 100, 30
	publish(t, l, devices, per)
	waitFor(t, "all messages delivered", 60*time.Second, func() bool { return w.count() == devices*per })
	wg.Wait()
	reg.Drain(time.Now().Add(5 * time.Second))
	members := map[string]int{}
	for _, d := range w.all {
		members[d.member]++
	}
	if len(members) != 4 {
		t.Fatalf("deliveries by member %v: work was not shared", members)
	}
	// The group committed everything: a new group instance has nothing to do.
	for p := 0; p < l.NumPartitions(); p++ {
		off, _ := l.Offsets().Get(key.consumerName(), p)
		if off != l.Durable(p) {
			t.Fatalf("partition %d committed %d of %d", p, off, l.Durable(p))
		}
	}
}

func TestRedeliveryNakTermAndDeadLetter(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	// ack_wait 2s: with 300ms and an in-progress every 50ms, a loaded
	// machine (race detector, load 30) still let it expire 3 runs of 3.
	cfg.AckWait = 2 * time.Second
	cfg.MaxDeliver = 3
	var dlqMu sync.Mutex
	var dlq []map[string]string
	reg := newRegistry(l, cfg, func(queue string, d *Delivery, reason string) {
		dlqMu.Lock()
		defer dlqMu.Unlock()
		dlq = append(dlq, map[string]string{"queue": queue, "reason": reason, "device": d.Record.Device,
			"payload": string(d.Record.Payload), "handle": fmt.Sprint(d.Ack.IsZero())})
	})
	w := newWorld(t)
	var wg sync.WaitGroup
	key := GroupKey{"telemetry.*", "q"}
	// silent never answers dev-0's first delivery; others follow the payload's instruction.
	policy := func(d delivery) answer {
		switch {
		case strings.HasPrefix(d.payload, "timeout") && d.deliveries == 1:
			return answer{}
		case strings.HasPrefix(d.payload, "nak") && d.deliveries == 1:
			return answer{kind: AckNak, nakDelay: 50 * time.Millisecond}
		case strings.HasPrefix(d.payload, "wpi") && d.deliveries == 1:
			// in progress again and again, spanning more than ack_wait, then ack
			// (every 100ms: a stall of 1.9s would be needed to miss ack_wait)
			go func() {
				for i := 0; i < 30; i++ {
					time.Sleep(100 * time.Millisecond)
					reg.Ack(Ack{Handle: d.handle, Kind: AckInProgress})
				}
			}()
			return ackAfter(3 * time.Second)
		case strings.HasPrefix(d.payload, "term"):
			return answer{kind: AckTerm}
		case strings.HasPrefix(d.payload, "poison"):
			return answer{kind: AckNak}
		}
		return ackAfter(0)
	}
	for _, id := range []string{"a", "b"} {
		join(t, reg, key, id, &member{id: id, w: w, reg: reg, wg: &wg, policy: policy}, 10)
	}
	for i, p := range []string{"timeout", "nak", "wpi", "term", "poison", "fine"} {
		dev := fmt.Sprintf("d%d", i)
		if _, err := l.Append(context.Background(), &wal.Record{Device: dev, Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "dead letters", 20*time.Second, func() bool {
		dlqMu.Lock()
		defer dlqMu.Unlock()
		return len(dlq) == 2
	})
	waitFor(t, "all finished", 20*time.Second, func() bool {
		s := reg.Stats()
		return len(s) == 1 && s[0].Core.InFlight == 0 && s[0].Core.Pending == 0 && s[0].Core.Acked >= 4
	})
	wg.Wait()
	byPayload := map[string][]delivery{}
	for _, d := range w.all {
		byPayload[d.payload] = append(byPayload[d.payload], d)
	}
	if ds := byPayload["timeout"]; len(ds) != 2 || ds[1].deliveries != 2 || ds[0].member == ds[1].member {
		t.Fatalf("ack_wait redelivery: %+v (want a second delivery, count 2, to the other member)", ds)
	}
	if ds := byPayload["nak"]; len(ds) != 2 || ds[1].deliveries != 2 {
		t.Fatalf("nak redelivery: %+v", ds)
	}
	if ds := byPayload["wpi"]; len(ds) != 1 {
		t.Fatalf("in-progress message redelivered: %+v", ds)
	}
	if ds := byPayload["poison"]; len(ds) != 3 {
		t.Fatalf("poison delivered %d times, want max_deliver 3", len(ds))
	}
	dlqMu.Lock()
	defer dlqMu.Unlock()
	reasons := map[string]string{}
	for _, h := range dlq {
		reasons[h["payload"]] = h["reason"]
		if h["queue"] != "q" || h["device"] == "" || h["handle"] != "true" {
			t.Fatalf("dead letter %v", h)
		}
	}
	if reasons["term"] != "term" || reasons["poison"] != "max_deliver" {
		t.Fatalf("dead letter reasons %v", reasons)
	}
}

func TestDrainAndResumeFromCommittedOffsets(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	reg := newRegistry(l, cfg, nil)
	w := newWorld(t)
	var wg sync.WaitGroup
	key := GroupKey{"telemetry.>", "q"}
	m := &member{id: "a", w: w, reg: reg, wg: &wg, policy: func(delivery) answer { return ackAfter(0) }}
	join(t, reg, key, "a", m, 64)
	publish(t, l, 20, 10)
	waitFor(t, "first 200", 20*time.Second, func() bool { return w.count() == 200 })
	wg.Wait()
	reg.Drain(time.Now().Add(2 * time.Second))
	l.Close()

	l = openLog(t, dir)
	defer l.Close()
	reg = newRegistry(l, cfg, nil)
	w2 := newWorld(t)
	// The second run continues each device's sequence from 11.
	for d := 0; d < 20; d++ {
		w2.firstSeq[fmt.Sprintf("dev-%d", d)] = 10
	}
	m2 := &member{id: "b", w: w2, reg: reg, wg: &wg, policy: func(delivery) answer { return ackAfter(0) }}
	join(t, reg, key, "b", m2, 64)
	publish(t, l, 20, 5)
	waitFor(t, "next 100", 20*time.Second, func() bool { return w2.count() == 100 })
	time.Sleep(100 * time.Millisecond)
	wg.Wait()
	if w2.count() != 100 || len(w2.all) != 100 {
		t.Fatalf("after restart %d distinct, %d deliveries: acked messages came again", w2.count(), len(w2.all))
	}
	reg.Drain(time.Now().Add(time.Second))
}

func TestLiveTail(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	publish(t, l, 3, 2) // before the tail: never seen
	tail := NewTail(l, "telemetry", "n1", quiet())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tail.Run(ctx)
	var mu sync.Mutex
	var got []string
	var refuse bool
	cancelSub, err := tail.Subscribe("telemetry.dev-1", memberFunc(func(d *Delivery) bool {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return false
		}
		got = append(got, string(d.Record.Payload))
		if !d.Ack.IsZero() || d.Deliveries != 0 {
			t.Errorf("tail delivery with an ack handle %+v", d.Ack)
		}
		return true
	}))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, l, 3, 2)
	waitFor(t, "tail", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	if got[0] != "dev-1#1" || got[1] != "dev-1#2" {
		t.Fatalf("tail got %v", got)
	}
	refuse = true
	mu.Unlock()
	publish(t, l, 2, 1)
	waitFor(t, "drop counted", 10*time.Second, func() bool { return tail.Stats().Dropped == 1 })
	cancelSub()
	if tail.Stats().Subscribers != 0 {
		t.Fatal("subscriber not removed")
	}
}

type memberFunc func(d *Delivery) bool

func (f memberFunc) Deliver(d *Delivery) bool { return f(d) }

func TestDeviceMatcher(t *testing.T) {
	cases := []struct {
		filter, device string
		want           bool
	}{
		{"telemetry.>", "a", true}, {"telemetry.*", "a", true}, {">", "a", true}, {"*.*", "a", true},
		{"telemetry.a", "a", true}, {"telemetry.a", "b", false}, {"other.>", "a", false},
		{"telemetry.*.x", "a", false}, {"telemetry", "a", false}, {"*.a", "a", true},
	}
	for _, c := range cases {
		m, err := newDeviceMatcher(c.filter, "telemetry")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.match(c.device); got != c.want || got != subject.Match(c.filter, "telemetry."+c.device) {
			t.Errorf("%s ~ %s: %v, want %v", c.filter, c.device, got, c.want)
		}
	}
}

// flagged records first deliveries and whether they were flagged as
// possibly delivered before; hold keeps them unanswered.
type flagged struct {
	mu    sync.Mutex
	reg   *Registry
	hold  bool
	got   map[string]bool // device#seq -> MaybeDelivered of its first delivery here
	order []string
}

func (f *flagged) Deliver(d *Delivery) bool {
	key := fmt.Sprintf("%s#%d", d.Record.Device, d.Record.Seq)
	f.mu.Lock()
	if _, ok := f.got[key]; !ok && d.Deliveries == 1 {
		f.got[key] = d.MaybeDelivered
		f.order = append(f.order, key)
	}
	hold, h := f.hold, d.Ack
	f.mu.Unlock()
	if !hold {
		go f.reg.Ack(Ack{Handle: h, Kind: AckDone})
	}
	return true
}

func (f *flagged) snapshot() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]bool, len(f.got))
	for k, v := range f.got {
		out[k] = v
	}
	return out
}

// TestRestartFlagsWhatMayHaveBeenDelivered: a run that stops with messages
// unacknowledged (a drain that timed out, as a crash would) leaves them past
// the commits; the next run's first deliveries of them say they may have
// been delivered before. A run that drains fully records it, and the run
// after it flags nothing. A new group flags nothing either.
func TestRestartFlagsWhatMayHaveBeenDelivered(t *testing.T) {
	dir := t.TempDir()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	key := GroupKey{"telemetry.>", "q"}
	run := func(hold bool, publishDevices int, want int) map[string]bool {
		t.Helper()
		l := openLog(t, dir)
		defer l.Close()
		// Stored before the group's run starts: past its commits then.
		if publishDevices > 0 {
			publish(t, l, publishDevices, 2)
		}
		reg := newRegistry(l, cfg, nil)
		f := &flagged{reg: reg, hold: hold, got: map[string]bool{}}
		join(t, reg, key, "w", f, 64)
		waitFor(t, "first deliveries", 10*time.Second, func() bool { return len(f.snapshot()) == want })
		if hold {
			reg.Drain(time.Now()) // gives up at once: the held messages stay unfinished
		} else {
			waitFor(t, "all acked", 10*time.Second, func() bool { s := reg.Stats(); return s[0].Core.InFlight == 0 && s[0].Core.Pending == 0 })
			reg.Drain(time.Now().Add(5 * time.Second))
		}
		return f.snapshot()
	}
	// Run 1: a new group; the worker holds one message per device.
	first := run(true, 5, 5)
	for k, maybe := range first {
		if maybe {
			t.Errorf("run 1 (new group): %s flagged", k)
		}
	}
	// Run 2: what run 1 delivered comes first, flagged; then the rest.
	second := run(false, 0, 10)
	for k := range first {
		if !second[k] {
			t.Errorf("run 2: %s was delivered in run 1 but not flagged", k)
		}
	}
	// Run 3 after a full drain: new messages, nothing flagged.
	third := run(false, 5, 10)
	for k, maybe := range third {
		if maybe {
			t.Errorf("run 3 (after a full drain): %s flagged", k)
		}
	}
}
