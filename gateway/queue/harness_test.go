package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// harness plays the runner for scenario scripts: it owns a simulated store,
// answers Fetch actions (long poll: only once the store has news), records
// commits and prints every action as one line.
type harness struct {
	cfg        Config
	seed       uint64
	store      *memStore
	g          *Group
	epoch      time.Time
	now        time.Time
	committed  map[int]uint64 // last Commit per partition; absent: no position yet
	parts      []int
	pending    map[int]Fetch // outstanding Fetch per partition
	refetch    map[int]Fetch // outstanding Refetch per partition
	held       []heldDelivery
	traceFetch bool
	hold       bool // storage is slow: fetches stay unanswered until release
	// budget, perRecord: the read-ahead budget (SetBudget), kept across restarts.
	budget, perRecord int
	out               strings.Builder
}

type heldDelivery struct {
	member MemberID
	ref    Ref
	try    int
}

func newHarness() *harness {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	return &harness{epoch: epoch, now: epoch}
}

func (h *harness) printf(format string, args ...any) { fmt.Fprintf(&h.out, format+"\n", args...) }

// run executes one script command and returns its transcript.
func (h *harness) run(line string) string {
	h.out.Reset()
	fields := strings.Fields(line)
	args := map[string]string{}
	var pos []string
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	if err := h.exec(fields[0], pos, args); err != nil {
		h.printf("error: %v", err)
	}
	if h.g != nil {
		h.pump()
	}
	return h.out.String()
}

func (h *harness) exec(cmd string, pos []string, args map[string]string) error {
	if h.g == nil && cmd != "new" {
		return fmt.Errorf("no group: start with new")
	}
	now := h.now
	switch cmd {
	case "new":
		return h.cmdNew(args)
	case "restart":
		return h.restart()
	case "publish":
		return h.cmdPublish(args)
	case "move":
		node, home := h.nodeHome(args)
		m := h.store.move(node, args["dev"], home, atoi(args["to"]))
		h.printf("append %s %s marker->p%d", m.Ref(), m.Device, m.MoveTarget)
	case "drop":
		h.store.drop(atoi(args["p"]), uint64(atoi(args["before"])))
	case "join":
		credit := DefaultCredit
		if c, ok := args["credit"]; ok {
			credit = atoi(c)
		}
		return h.g.AddMember(MemberID(pos[0]), credit, now)
	case "leave":
		h.forget(MemberID(pos[0]))
		return h.g.RemoveMember(MemberID(pos[0]), now)
	case "credit":
		return h.g.SetCredit(MemberID(pos[0]), atoi(pos[1]), now)
	case "ack", "nak", "wpi", "term":
		return h.acknowledge(cmd, pos, args)
	case "ack-all":
		return h.ackAll(pos)
	case "tick":
		if len(pos) > 0 {
			d, err := time.ParseDuration(pos[0])
			if err != nil {
				return err
			}
			h.now = h.now.Add(d)
		}
		return h.g.Tick(h.now)
	case "hold":
		h.hold = true
	case "release":
		h.hold = false
	case "answer": // answer one partition's fetch now, even while holding
		h.answer(atoi(args["p"]))
	case "advance": // the clock moves, no Tick yet
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			return err
		}
		h.now = h.now.Add(d)
	case "drain", "withdraw":
		d, err := time.ParseDuration(args["timeout"])
		if err != nil {
			return err
		}
		if cmd == "withdraw" {
			return h.g.Withdraw(now.Add(d), now)
		}
		return h.g.Drain(now.Add(d), now)
	case "next-deadline":
		if t, ok := h.g.NextDeadline(); ok {
			h.printf("next deadline +%v", t.Sub(h.epoch))
		} else {
			h.printf("no deadline")
		}
	case "pause", "resume":
		return h.g.Pause(atoi(args["p"]), cmd == "pause", now)
	case "stats":
		h.printStats()
	case "budget": // budget bytes=N per=M: the read-ahead budget, 0 lifts it
		h.budget, h.perRecord = atoi(args["bytes"]), atoi(args["per"])
		h.g.SetBudget(h.budget, h.perRecord)
	case "usage":
		n, b := h.g.Usage()
		h.printf("held %d records, %d bytes, cost %d", n, b, h.g.Cost(h.perRecord, 0))
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("script: bad number %q", s)) // a broken script, not bad input to the code under test
	}
	return n
}

func (h *harness) cmdNew(args map[string]string) error {
	cfg := DefaultConfig()
	h.seed = 1
	h.parts = []int{0}
	h.traceFetch = args["trace"] == "fetch"
	h.hold = false
	h.budget, h.perRecord = 0, 0
	var unread []int
	var err error
	for k, v := range args {
		switch k {
		case "ordering":
			cfg.Ordering, err = ParseOrdering(v)
		case "strategy":
			cfg.Strategy, err = ParseStrategy(v)
		case "deliver":
			cfg.Deliver, err = ParseDeliverPolicy(v)
		case "ack_wait":
			cfg.AckWait, err = time.ParseDuration(v)
		case "max_nak_delay":
			cfg.MaxNakDelay, err = time.ParseDuration(v)
		case "max_deliver":
			cfg.MaxDeliver = atoi(v)
		case "max_in_flight":
			cfg.MaxInFlight = atoi(v)
		case "read_ahead":
			cfg.ReadAheadMsgs = atoi(v)
		case "read_ahead_bytes":
			cfg.ReadAheadBytes = atoi(v)
		case "share":
			cfg.DeviceShareMsgs = atoi(v)
		case "share_bytes":
			cfg.DeviceShareBytes = atoi(v)
		case "window":
			cfg.DeviceWindow = atoi(v)
		case "max_aside":
			cfg.MaxAsideDevices = atoi(v)
		case "seed":
			h.seed = uint64(atoi(v))
		case "partitions":
			h.parts = nil
			for _, p := range strings.Split(v, ",") {
				h.parts = append(h.parts, atoi(p))
			}
		case "unread": // partitions in storage that the group does not read
			for _, p := range strings.Split(v, ",") {
				unread = append(unread, atoi(p))
			}
		case "filter":
			prefix := v
			cfg.Filter = func(m *Msg) bool { return strings.HasPrefix(m.Device, prefix) }
		case "hold":
			h.hold = v == "true"
		case "trace":
		default:
			return fmt.Errorf("new: unknown option %q", k)
		}
		if err != nil {
			return err
		}
	}
	h.cfg = cfg
	h.store = newMemStore(append(unread, h.parts...)...)
	h.committed = map[int]uint64{}
	return h.build()
}

// build makes a group from the committed offsets, as a runner does at start.
func (h *harness) build() error {
	start := map[int]uint64{}
	for _, p := range h.parts {
		if c, ok := h.committed[p]; ok {
			start[p] = c + 1
		} else {
			start[p] = 0
		}
	}
	g, err := New(h.cfg, start, rand.New(rand.NewPCG(h.seed, 0)))
	if err != nil {
		return err
	}
	h.g = g
	g.SetBudget(h.budget, h.perRecord)
	h.pending = map[int]Fetch{}
	h.refetch = map[int]Fetch{}
	h.held = nil
	return nil
}

func (h *harness) restart() error {
	var b []string
	for _, p := range h.parts {
		if c, ok := h.committed[p]; ok {
			b = append(b, fmt.Sprintf("p%d=%d", p, c+1))
		} else {
			b = append(b, fmt.Sprintf("p%d=none", p))
		}
	}
	h.printf("restart from %s", strings.Join(b, " "))
	return h.build()
}

func (h *harness) nodeHome(args map[string]string) (node, home int) {
	home = h.parts[0]
	if p, ok := args["p"]; ok {
		home = atoi(p)
	}
	return nodeOf(home), home
}

func (h *harness) cmdPublish(args map[string]string) error {
	node, home := h.nodeHome(args)
	n, size := 1, 10
	if v, ok := args["n"]; ok {
		n = atoi(v)
	}
	if v, ok := args["bytes"]; ok {
		size = atoi(v)
	}
	for _, dev := range strings.Split(args["dev"], ",") {
		for range n {
			m := h.store.publish(node, dev, home, size)
			h.printf("append %s %s#%d%s", m.Ref(), m.Device, m.Seq, moveSuffix(m))
		}
	}
	return nil
}

func moveSuffix(m Msg) string {
	if m.MoveRef.IsZero() {
		return ""
	}
	return " after " + m.MoveRef.String()
}

func parseRef(s string) (Ref, error) {
	p, o, ok := strings.Cut(strings.TrimPrefix(s, "p"), "@")
	if !ok {
		return Ref{}, fmt.Errorf("bad ref %q, want pN@OFFSET", s)
	}
	return Ref{Partition: atoi(p), Offset: uint64(atoi(o))}, nil
}

func (h *harness) acknowledge(cmd string, pos []string, args map[string]string) error {
	member := MemberID(pos[0])
	ref, err := parseRef(pos[1])
	if err != nil {
		return err
	}
	try := 0
	for _, d := range h.held {
		if d.member == member && d.ref == ref {
			try = d.try
		}
	}
	if v, ok := args["try"]; ok {
		try = atoi(v)
	}
	now := h.now
	switch cmd {
	case "ack":
		err = h.g.Ack(member, ref, try, now)
	case "nak":
		var delay time.Duration
		if v, ok := args["delay"]; ok {
			if delay, err = time.ParseDuration(v); err != nil {
				return err
			}
		}
		err = h.g.Nak(member, ref, try, delay, now)
	case "wpi":
		err = h.g.InProgress(member, ref, try, now)
	case "term":
		err = h.g.Term(member, ref, try, now)
	}
	if err == nil && cmd != "wpi" {
		h.held = slices.DeleteFunc(h.held, func(d heldDelivery) bool { return d.member == member && d.ref == ref })
	}
	return err
}

// ackAll acks every delivery the harness saw, oldest first (of one member if named).
func (h *harness) ackAll(pos []string) error {
	for len(h.held) > 0 {
		var d heldDelivery
		i := slices.IndexFunc(h.held, func(d heldDelivery) bool { return len(pos) == 0 || d.member == MemberID(pos[0]) })
		if i < 0 {
			return nil
		}
		d = h.held[i]
		h.held = slices.Delete(h.held, i, i+1)
		h.printf("ack %s %s try %d", d.member, d.ref, d.try)
		if err := h.g.Ack(d.member, d.ref, d.try, h.now); err != nil {
			h.printf("error: %v", err)
		}
		h.pump()
	}
	return nil
}

func (h *harness) forget(member MemberID) {
	h.held = slices.DeleteFunc(h.held, func(d heldDelivery) bool { return d.member == member })
}

// pump hands every action to the transcript and answers fetches that have news.
func (h *harness) pump() {
	for {
		rd := h.g.Ready()
		for _, dl := range rd.DeadLetter {
			h.printf("dead %s %s#%d after %d deliveries: %s", dl.Msg.Ref(), dl.Msg.Device, dl.Msg.Seq, dl.Deliveries, dl.Reason)
			h.forgetRef(dl.Msg.Ref())
		}
		for _, d := range rd.Deliver {
			h.printf("deliver %s %s#%d try %d -> %s", d.Msg.Ref(), d.Msg.Device, d.Msg.Seq, d.Deliveries, d.Member)
			h.forgetRef(d.Msg.Ref())
			h.held = append(h.held, heldDelivery{member: d.Member, ref: d.Msg.Ref(), try: d.Deliveries})
		}
		for _, f := range rd.Fetch {
			if f.Refetch {
				h.printf("refetch p%d from %d max %d msgs", f.Partition, f.From, f.MaxMsgs)
				h.refetch[f.Partition] = f
				continue
			}
			if h.traceFetch {
				if f.End {
					h.printf("fetch p%d end", f.Partition)
				} else {
					h.printf("fetch p%d from %d max %d msgs %d bytes", f.Partition, f.From, f.MaxMsgs, f.MaxBytes)
				}
			}
			h.pending[f.Partition] = f
		}
		for _, c := range rd.Commit {
			h.printf("commit p%d=%d", c.Partition, c.Offset)
			h.committed[c.Partition] = c.Offset
		}
		if rd.Drained {
			h.printf("drained")
		}
		if !h.answerFetches() && !h.g.HasReady() {
			return
		}
	}
}

func (h *harness) forgetRef(r Ref) {
	h.held = slices.DeleteFunc(h.held, func(d heldDelivery) bool { return d.ref == r })
}

// answerFetches answers outstanding fetches whose partition has news; true if it answered any.
func (h *harness) answerFetches() bool {
	if h.hold {
		return false
	}
	answered := false
	for _, p := range h.parts {
		if h.answerRefetch(p) {
			answered = true
		}
		if h.answer(p) {
			answered = true
		}
	}
	return answered
}

// answerRefetch answers partition p's outstanding Refetch (at once: the records are stored).
func (h *harness) answerRefetch(p int) bool {
	f, ok := h.refetch[p]
	if !ok {
		return false
	}
	delete(h.refetch, p)
	msgs, next := h.store.read(p, f.From, f.MaxMsgs, f.MaxBytes)
	h.printf("refetched p%d: %d records, next %d", p, len(msgs), next)
	if err := h.g.Refetched(p, msgs, next, h.now); err != nil {
		h.printf("refetched p%d: %v", p, err)
	}
	return true
}

// answer answers partition p's outstanding fetch if it has news.
func (h *harness) answer(p int) bool {
	f, ok := h.pending[p]
	if !ok {
		return false
	}
	{
		var msgs []Msg
		var next uint64
		switch {
		case f.End:
			next = h.store.end(p)
		case h.store.hasNews(p, f.From):
			msgs, next = h.store.read(p, f.From, f.MaxMsgs, f.MaxBytes)
		default:
			return false // long poll: hold it
		}
		delete(h.pending, p)
		if h.traceFetch {
			h.printf("fetched p%d: %d records, next %d", p, len(msgs), next)
		}
		if err := h.g.Fetched(p, msgs, next, h.now); err != nil {
			h.printf("fetched p%d: %v", p, err)
		}
	}
	return true
}

func (h *harness) printStats() {
	s := h.g.Stats()
	h.printf("members %d (active %d), in flight %d, pending %d, active devices %d",
		s.Members, s.ActiveMembers, s.InFlight, s.Pending, s.ActiveDevices)
	h.printf("fetched %d, lost %d, filtered %d, delivered %d, redelivered %d",
		s.Fetched, s.Lost, s.Filtered, s.Delivered, s.Redeliveries)
	h.printf("acked %d, naks %d, terms %d, in progress %d, timeouts %d, leave requeues %d, dead letters %d, stale acks %d",
		s.Acked, s.Naks, s.Terms, s.InProgress, s.Timeouts, s.LeaveRequeue, s.DeadLetters, s.StaleAcks)
	for _, m := range s.MemberList {
		h.printf("%s: credit %d, in flight %d, waiting %d", m.ID, m.Credit, m.InFlight, m.Waiting)
	}
	for _, p := range s.Partitions {
		h.printf("p%d: committed %d, next %d, span %d, bytes %d", p.Partition, p.Committed, p.Next, p.Span, p.Bytes)
		if p.SetAside > 0 || p.Asides > 0 || s.StallsAvoided > 0 {
			h.printf("p%d: held %d, busiest %d, set aside %d, aside devices %d, blocked %v", p.Partition, p.Held, p.Busiest, p.SetAside, p.Asides, p.Blocked)
		}
	}
	if s.StallsAvoided > 0 || s.SetAside > 0 {
		h.printf("stalls avoided %d, set aside %d, evicted %d, aside blocked %d", s.StallsAvoided, s.SetAside, s.Evicted, s.AsideBlocked)
	}
}
