package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/internal/powerfs"
	"edgeq/wal"

	"github.com/nats-io/nats.go"
)

// The power-cut series: the real binary with its data directory on a FUSE
// mount that drops whatever was not fsynced (internal/powerfs), publishers
// with pub-acks, fire-and-forget publishers (no reply subject: records
// nobody waits for) and acking workers, then a power cut at a chosen moment,
// kill -9 and a restart, round after round. Workers see only durable
// records: no message a worker saw may lie beyond the log a cut leaves.
// EDGEQ_E2E_POWERCUT_ROUNDS sets the number of rounds (make powercut ROUNDS=1000),
// EDGEQ_E2E_POWERCUT_SEED the seed of the cut moments (see powerCutSeed).

// mountPowerFS mounts a power-cut file system; without FUSE or root the test
// skips (fails with CI=true).
func mountPowerFS(t testing.TB, opts powerfs.Options) *powerfs.FS {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the power-cut tests need /dev/fuse and root, and CI=true")
		}
		t.Skip("the power-cut tests need /dev/fuse and root")
	}
	opts.Dir = t.TempDir()
	f, err := powerfs.Mount(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the node's cleanup, so it runs after the node is gone.
	t.Cleanup(func() { f.Close() })
	return f
}

// powerCutSeed is the seed of the cut moments: EDGEQ_E2E_POWERCUT_SEED when
// set; otherwise a new random one with CI=true (every CI run cuts at other
// moments) and 1 for a local go test (the same moments every run). The test
// logs it, and a failing series names the variable that replays it.
func powerCutSeed() uint64 {
	if v := os.Getenv("EDGEQ_E2E_POWERCUT_SEED"); v != "" {
		if s, err := strconv.ParseUint(v, 10, 64); err == nil {
			return s
		}
	}
	if os.Getenv("CI") == "true" {
		return 1 + rand.Uint64N(1<<31)
	}
	return 1
}

// powerCutSeedValue is powerCutSeed, read once per test process so that both
// halves of TestPowerCut cut with the same seed.
var powerCutSeedValue = sync.OnceValue(powerCutSeed)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// moment is where in the node's work a round cuts the power: right after the
// n-th change the matcher accepts (n random in 1..upTo).
type moment struct {
	name  string
	upTo  int
	match func(e powerfs.Event) bool
}

var (
	segmentRE = regexp.MustCompile(`^data/wal/p(\d{3})/\d{20}$`)
	journalRE = regexp.MustCompile(`^data/wal/journal/\d{20}$`)
	walDirRE  = regexp.MustCompile(`^data/wal/p\d{3}/`)
)

func segmentOf(path string) (partition int, ok bool) {
	m := segmentRE.FindStringSubmatch(path)
	if m == nil {
		return 0, false
	}
	p, _ := strconv.Atoi(m[1])
	return p, true
}

func powerCutMoments(partitions int) []moment {
	return []moment{
		{"group commit: a batch written, not yet fsynced", 200, func(e powerfs.Event) bool {
			_, ok := segmentOf(e.Path)
			return e.Op == powerfs.OpWrite && ok
		}},
		{"group commit: right after the fsync", 100, func(e powerfs.Event) bool {
			_, ok := segmentOf(e.Path)
			return e.Op == powerfs.OpFsync && (ok || journalRE.MatchString(e.Path))
		}},
		{"commit journal: a round written, not yet fsynced", 100, func(e powerfs.Event) bool {
			return e.Op == powerfs.OpWrite && journalRE.MatchString(e.Path)
		}},
		{"segment roll: new segment created", 3, func(e powerfs.Event) bool {
			_, ok := segmentOf(e.Path)
			return e.Op == powerfs.OpCreate && ok
		}},
		{"retention: a truncate or segment removal in progress", 3, func(e powerfs.Event) bool {
			return walDirRE.MatchString(e.Path) && (strings.Contains(e.Path, ".START") || strings.Contains(e.Path, ".TEMP") ||
				e.Op == powerfs.OpUnlink || e.Op == powerfs.OpRename)
		}},
		{"offset commit", 8, func(e powerfs.Event) bool {
			return strings.HasPrefix(e.Path, "data/wal/offsets.") || strings.HasPrefix(e.To, "data/wal/offsets.")
		}},
		{"device-table checkpoint", 6, func(e powerfs.Event) bool {
			return strings.HasPrefix(e.Path, "data/wal/devices.ckpt") || e.To == "data/wal/devices.ckpt"
		}},
		{"hot-device move: a write to a hot partition", 20, func(e powerfs.Event) bool {
			p, ok := segmentOf(e.Path)
			return e.Op == powerfs.OpWrite && ok && p >= partitions
		}},
		{"any change at all", 2000, func(e powerfs.Event) bool { return true }},
	}
}

// pcSeen is where a worker got a message, in which node run.
type pcSeen struct {
	partition int
	offset    uint64
	epoch     int
}

// pcAck is one pub-acked message.
type pcAck struct {
	pubAck
	epoch int // the node run that acknowledged it
}

// powerCut runs the series; it returns the pub-acked messages never
// delivered (the test decides whether that is a failure).
type powerCut struct {
	t      *testing.T
	fs     *powerfs.FS
	n      *node
	tr     *tracker
	epoch  atomic.Int64
	mu     sync.Mutex
	acks   map[string]pcAck // payload -> ack
	seqs   map[string]string
	seqBad int
	lossy  bool // durability none: a reused Edgeq-Seq is expected
	// seen: where each delivered message was, and in which node run.
	seen map[string]pcSeen
	// counters
	offsetsAhead, ackedBeyondDurable, seenBeyondDurable int
	fireAndForget                                       atomic.Int64
	momentsHit                                          map[string]int
}

const pcPartitions = 4

// pcAckWait is the series' queue.ack_wait.
const pcAckWait = 10 * time.Second

func newPowerCut(t *testing.T, durability string, tear bool) *powerCut {
	fsys := mountPowerFS(t, powerfs.Options{Tear: tear})
	cfg := fmt.Sprintf(`wal:
  durability: %s
  partitions: %d
  hot_partitions: 2
  segment_size: 64KiB
  max_bytes: 1MiB
  max_age: 2s
  full_policy: reject
  retention_interval: 300ms
  checkpoint_interval: 500ms
queue:
  ack_wait: %s # under load a worker may hold a message a few seconds; a redelivery then is no bug
  # A worker's credit bounds what waits in its client before its handler
  # sees it: the tracker excuses an overlap only once ack_wait has passed
  # since the handler began, and the node's ack_wait runs from the send.
  # With 256 queued at load 50 a message can wait near ack_wait unseen
  # (seed 83541's one interval violation); 16 keep that wait short.
  max_in_flight: 16
hot:
  enabled: true
  window: 1s
  factor: 4
  min_rate: 20
groups:
  - {subject: telemetry.>, queue: workers, deliver: all}
`, durability, pcPartitions, pcAckWait)
	n := newNode(t, cfg)
	n.dataDir = filepath.Join(fsys.Path(), "data")
	tr := newTracker(t).withAckWait(pcAckWait)
	if durability == "none" {
		tr = newTracker(logOnly{t}).withAckWait(pcAckWait) // losses break order and seq checks there
	}
	return &powerCut{t: t, fs: fsys, n: n, tr: tr, lossy: durability == "none", acks: map[string]pcAck{}, seqs: map[string]string{}, seen: map[string]pcSeen{}, momentsHit: map[string]int{}}
}

// worker joins the queue group: order and in-flight checks (tracker), and
// Edgeq-Seq naming one message only.
func (pc *powerCut) worker(name string) {
	nc, err := nats.Connect(pc.n.url(), nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.t.Cleanup(nc.Close)
	delay := randomDelay(300)
	_, err = nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
		device, seq := pc.tr.enter(name, m)
		key := fmt.Sprintf("%s/%s/%d", m.Header.Get("Edgeq-Node"), device, seq)
		part, _ := strconv.Atoi(m.Header.Get("Edgeq-Partition"))
		off, _ := strconv.ParseUint(m.Header.Get("Edgeq-Offset"), 10, 64)
		epoch := int(pc.epoch.Load())
		pc.mu.Lock()
		pc.seen[string(m.Data)] = pcSeen{partition: part, offset: off, epoch: epoch}
		if prev, ok := pc.seqs[key]; ok && prev != string(m.Data) {
			pc.seqBad++
			if pc.seqBad <= 5 && !pc.lossy {
				pc.t.Errorf("Edgeq-Seq %s names two messages: %q and %q", key, prev, m.Data)
			}
		} else if !ok {
			pc.seqs[key] = string(m.Data)
		}
		pc.mu.Unlock()
		delay()
		pc.tr.exit(device)
		_ = m.Ack()
	})
	if err != nil {
		pc.t.Fatal(err)
	}
}

// publisher sends requests on telemetry.<device> one at a time and records
// the pub-acks; device(i) names the device of its i-th message.
func (pc *powerCut) publisher(id int, stop <-chan struct{}, wg *sync.WaitGroup, device func(i int) string) {
	nc, err := nats.Connect(pc.n.url(), publisherOptions()...)
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.t.Cleanup(nc.Close)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			dev := device(i)
			payload := fmt.Sprintf("%s|%d|%d", dev, id, i)
			epoch := int(pc.epoch.Load())
			reply, err := nc.Request("telemetry."+dev, []byte(payload), 2*time.Second)
			if err != nil {
				if errors.Is(err, nats.ErrConnectionClosed) {
					return
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			var a pubAck
			if json.Unmarshal(reply.Data, &a) != nil || a.Error != "" {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			pc.mu.Lock()
			pc.acks[payload] = pcAck{pubAck: a, epoch: epoch}
			pc.mu.Unlock()
		}
	}()
}

// fireAndForget publishes on telemetry.<device> without a reply subject
// (records nobody waits for: they ride on other rounds, a reader's wait or
// lazy_sync), one every few milliseconds, until stop.
func (pc *powerCut) fireAndForgetPublisher(id int, stop <-chan struct{}, wg *sync.WaitGroup) {
	nc, err := nats.Connect(pc.n.url(), publisherOptions()...)
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.t.Cleanup(nc.Close)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(4 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			dev := fmt.Sprintf("nw-%02d", (i*3+id)%20)
			if err := nc.Publish("telemetry."+dev, []byte(fmt.Sprintf("%s|nw%d|%d", dev, id, i))); err != nil {
				if errors.Is(err, nats.ErrConnectionClosed) {
					return
				}
				continue
			}
			pc.fireAndForget.Add(1)
		}
	}()
}

func (pc *powerCut) ackCount() int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return len(pc.acks)
}

// checkDurable inspects the data directory after a cut (node dead): every
// message pub-acked in this epoch lies at or below its partition's last
// durable record, and no committed offset is ahead of that.
func (pc *powerCut) checkDurable(epoch int) {
	t := pc.t
	dir := filepath.Join(pc.fs.Path(), "data", "wal")
	rep, err := wal.Check(dir, wal.DefaultOptions(), false)
	if err != nil {
		t.Errorf("round %d: wal check after the cut: %v", epoch, err)
		return
	}
	last := map[int]uint64{}
	for _, p := range rep.Partitions {
		// What the next open has: the valid records, and what the commit
		// journal restores of those the file lost.
		last[p.Partition] = p.OpenLast
	}
	pc.mu.Lock()
	for payload, a := range pc.acks {
		if a.epoch == epoch && a.Offset > last[a.Partition] {
			pc.ackedBeyondDurable++
			if pc.ackedBeyondDurable <= 5 {
				t.Logf("round %d: pub-acked %q at p%d/%d, but the durable log ends at %d", epoch, payload, a.Partition, a.Offset, last[a.Partition])
			}
		}
	}
	// A worker sees only durable records: nothing delivered in this run,
	// pub-acked or fire-and-forget, may lie beyond what the cut left.
	for payload, s := range pc.seen {
		if s.epoch == epoch && s.offset > last[s.partition] {
			pc.seenBeyondDurable++
			if pc.seenBeyondDurable <= 5 {
				report := t.Errorf
				if pc.lossy {
					report = t.Logf
				}
				report("round %d: a worker got %q at p%d/%d, but the durable log ends at %d", epoch, payload, s.partition, s.offset, last[s.partition])
			}
		}
	}
	pc.mu.Unlock()
	consumers, err := wal.ReadOffsets(dir)
	if err != nil {
		t.Errorf("round %d: offsets after the cut: %v", epoch, err)
		return
	}
	for c, parts := range consumers {
		for p, off := range parts {
			if off > last[p] {
				pc.offsetsAhead++
				report := t.Errorf
				if pc.lossy {
					report = t.Logf
				}
				report("round %d: consumer %s committed p%d/%d, but the durable log ends at %d", epoch, c, p, off, last[p])
			}
		}
	}
}

// run does the rounds and returns the pub-acked messages never delivered.
func (pc *powerCut) run(rounds int, seed uint64) (missing []string) {
	t := pc.t
	rng := rand.New(rand.NewPCG(seed, 7))
	pc.n.start()
	for i := range 3 {
		pc.worker(fmt.Sprintf("w%d", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range 12 {
		pc.publisher(id, stop, &wg, func(i int) string { return fmt.Sprintf("dev-%02d", (i*7+id)%40) })
	}
	for id := 12; id < 16; id++ {
		pc.publisher(id, stop, &wg, func(int) string { return "hot-1" })
	}
	for id := range 2 {
		pc.fireAndForgetPublisher(id, stop, &wg)
	}
	moments := powerCutMoments(pcPartitions)
	start := time.Now()
	for r := 1; r <= rounds; r++ {
		mo := moments[(r-1)%len(moments)]
		nth := 1 + rng.IntN(mo.upTo)
		seen := 0
		// Let the node run a while first: rolls, retention, hot moves need time.
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		frozen := pc.fs.FreezeOn(func(e powerfs.Event) bool {
			if mo.match(e) {
				seen++
				return seen >= nth
			}
			return false
		})
		hit := true
		select {
		case <-frozen:
		case <-time.After(4 * time.Second):
			hit = false
			pc.fs.Freeze()
		}
		if hit {
			pc.momentsHit[mo.name]++
		}
		pc.tr.crashed()
		pc.n.kill()
		time.Sleep(30 * time.Millisecond) // acks already on the wire reach the publishers
		epoch := int(pc.epoch.Add(1)) - 1
		if err := pc.fs.Cut(); err != nil {
			t.Fatalf("round %d: cut: %v", r, err)
		}
		pc.checkDurable(epoch)
		pc.n.start() // fails the test if the node does not start
		before := pc.ackCount()
		deadline := time.Now().Add(10 * time.Second)
		for pc.ackCount() < before+100 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	// Everything pub-acked must be delivered: wait for the workers.
	acked := map[string]pcAck{}
	pc.mu.Lock()
	for k, v := range pc.acks {
		acked[k] = v
	}
	pc.mu.Unlock()
	notSeen := func() []string {
		pc.tr.mu.Lock()
		defer pc.tr.mu.Unlock()
		var out []string
		for payload, a := range acked {
			if pc.tr.seen[payload] == 0 {
				out = append(out, fmt.Sprintf("%s@p%d/%d(run %d)", payload, a.Partition, a.Offset, a.epoch))
			}
		}
		return out
	}
	// Lost messages never come: stop waiting once nothing new arrives for a
	// while. The quiet spell must outlast ack_wait: a delivery that was
	// never acked is redelivered only after it.
	last, lastChange := -1, time.Now()
	for time.Since(lastChange) < pcAckWait+10*time.Second {
		m := len(notSeen())
		if m == 0 {
			break
		}
		if m != last {
			last, lastChange = m, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	missing = notSeen()
	sort.Strings(missing)
	var hits []string
	for name, c := range pc.momentsHit {
		hits = append(hits, fmt.Sprintf("%s: %d", name, c))
	}
	sort.Strings(hits)
	s := pc.fs.Stats()
	t.Logf("%d rounds in %v: %d messages pub-acked, %d fire-and-forget, %d distinct delivered, %d pub-acked never delivered, %d pub-acked beyond the durable log at a cut, %d delivered beyond it, %d offsets ahead; cuts dropped %d unsynced bytes, %d torn writes; moments hit: %s",
		rounds, time.Since(start).Round(time.Second), len(acked), pc.fireAndForget.Load(), pc.tr.distinct(), len(missing), pc.ackedBeyondDurable, pc.seenBeyondDurable, pc.offsetsAhead, s.DroppedBytes, s.Torn, strings.Join(hits, "; "))
	return missing
}

// logOnly reports a tracker's findings without failing the test.
type logOnly struct{ testing.TB }

func (l logOnly) Errorf(format string, args ...any) { l.Logf(format, args...) }

// TestPowerCut: under durability interval (the default) and always, nothing
// pub-acked is ever lost to a power cut at any of the moments.
func TestPowerCut(t *testing.T) {
	rounds := envInt("EDGEQ_E2E_POWERCUT_ROUNDS", 16)
	for _, mode := range []string{"interval", "always"} {
		t.Run(mode, func(t *testing.T) {
			r := rounds
			if mode == "always" {
				r = max(rounds/2, 2)
			}
			pc := newPowerCut(t, mode, true)
			seed := powerCutSeedValue()
			replay := fmt.Sprintf("EDGEQ_E2E_POWERCUT_SEED=%d", seed)
			if os.Getenv("EDGEQ_E2E_POWERCUT_ROUNDS") != "" {
				replay += fmt.Sprintf(" EDGEQ_E2E_POWERCUT_ROUNDS=%d", rounds)
			}
			replay += fmt.Sprintf(" go test -count=1 -run 'TestPowerCut$/%s' ./e2e", mode)
			t.Logf("seed %d (replay: %s)", seed, replay)
			defer func() {
				if t.Failed() {
					t.Logf("this series failed with seed %d: replay it with %s", seed, replay)
				}
			}()
			missing := pc.run(r, seed)
			if len(missing) > 0 {
				t.Errorf("%d pub-acked messages never delivered, e.g. %v", len(missing), missing[:min(10, len(missing))])
			}
			if pc.ackedBeyondDurable > 0 {
				t.Errorf("%d pub-acked messages were beyond the durable log at a cut", pc.ackedBeyondDurable)
			}
			if pc.seenBeyondDurable > 0 {
				t.Errorf("%d delivered messages were beyond the durable log at a cut", pc.seenBeyondDurable)
			}
			if pc.tr.problems > 0 {
				t.Errorf("%d order or in-flight violations", pc.tr.problems)
			}
		})
	}
}

// TestPowerCutDurabilityNone proves the series has teeth: durability none
// acknowledges before fsync, so power cuts lose pub-acked messages.
func TestPowerCutDurabilityNone(t *testing.T) {
	pc := newPowerCut(t, "none", false)
	// Only cuts at arbitrary changes and group commits: nothing waits for a
	// segment roll (whose fsync would save the data).
	missing := pc.run(envInt("EDGEQ_E2E_POWERCUT_NONE_ROUNDS", 3), 1)
	if len(missing) == 0 && pc.ackedBeyondDurable == 0 {
		t.Fatal("durability none lost no pub-acked message over the series: the test cannot see a loss")
	}
	t.Logf("durability none: %d pub-acked messages lost, %d beyond the durable log at a cut, %d delivered beyond it (expected)", len(missing), pc.ackedBeyondDurable, pc.seenBeyondDurable)
	t.Logf("durability none: %d Edgeq-Seq repeats, %d order or in-flight findings (expected after losses)", pc.seqBad, pc.tr.problems)
}
