package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Issue 19: one chatty device (H) must not stall its neighbours, neither
// while it is hot nor when it cools down with a backlog, with hot isolation
// on (it moves to a hot partition and back) or off (the per-device share of
// the read-ahead window alone protects the neighbours).

const (
	hotNeighbours    = 40
	hotNeighbourRate = 20  // msgs/s each
	hotPeakRate      = 400 // msgs/s of H while hot
	hotPeak          = 12 * time.Second
	hotWork          = 5 * time.Millisecond // every message's handler time
	hotP99Bound      = 500 * time.Millisecond
)

// latencies collects publish→delivery times of first deliveries per device.
type latencies struct {
	mu    sync.Mutex
	byDev map[string][]time.Duration
	hSeqs []uint64
}

func (l *latencies) observe(device string, m *nats.Msg) {
	_, ts, ok := strings.Cut(string(m.Data), "|")
	if !ok {
		return
	}
	ns, _ := strconv.ParseInt(ts, 10, 64)
	d := time.Since(time.Unix(0, ns))
	l.mu.Lock()
	if m.Header.Get("Edgeq-Deliveries") == "1" {
		l.byDev[device] = append(l.byDev[device], d)
	}
	if device == "hot-h" {
		seq, _ := strconv.ParseUint(m.Header.Get("Edgeq-Seq"), 10, 64)
		l.hSeqs = append(l.hSeqs, seq)
	}
	l.mu.Unlock()
}

// p99 returns the 99th percentile and the maximum over the devices keep
// selects, and how many deliveries that is.
func (l *latencies) p99(keep func(device string) bool) (time.Duration, time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []time.Duration
	for dev, ds := range l.byDev {
		if keep(dev) {
			all = append(all, ds...)
		}
	}
	if len(all) == 0 {
		return 0, 0, 0
	}
	slices.Sort(all)
	return all[len(all)*99/100], all[len(all)-1], len(all)
}

// windowStatus is the part of /v1/status this test watches.
type windowStatus struct {
	Groups []struct {
		Queue         string            `json:"queue"`
		StallsAvoided uint64            `json:"neighbour_stalls_avoided"`
		Lag           map[string]uint64 `json:"partition_lag"`
		Window        map[string]struct {
			Messages int `json:"messages"`
			Busiest  int `json:"busiest_device"`
			SetAside int `json:"set_aside"`
		} `json:"window"`
	} `json:"groups"`
}

// watchWindows samples /v1/status until stop and returns, per partition,
// the most records a window held and the most its busiest device held, and
// the last stalls-avoided count.
func watchWindows(n *node, stop <-chan struct{}, timeline *strings.Builder) (held, busiest map[string]int, stalls *uint64, done <-chan struct{}) {
	held, busiest, stalls = map[string]int{}, map[string]int{}, new(uint64)
	ch := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(ch)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			resp, err := http.Get(n.httpURL() + "/v1/status")
			if err != nil {
				continue
			}
			var st windowStatus
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				continue
			}
			for _, g := range st.Groups {
				if i%8 == 0 { // every 2 s: the lag of the partitions with one
					fmt.Fprintf(timeline, " +%ds lag %v;", int(time.Since(start).Seconds()), g.Lag)
				}
				*stalls = g.StallsAvoided
				for p, w := range g.Window {
					held[p] = max(held[p], w.Messages)
					busiest[p] = max(busiest[p], w.Busiest)
				}
			}
		}
	}()
	return held, busiest, stalls, ch
}

// pace publishes for device at rate msgs/s from start until end() (read
// again before each message), catching up when it falls behind; the
// payload carries a counter and the publish time.
func pace(p *publisher, device string, rate float64, start time.Time, end func() time.Time, next *int) {
	for k := 0; ; k++ {
		at := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
		if !at.Before(end()) {
			return
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		*next++
		p.publish(device, fmt.Sprintf("%s/%d|%d", device, *next, time.Now().UnixNano()))
	}
}

func runHotScenario(t *testing.T, isolation bool) {
	// A window of 256 (a small gateway's setting; the default is 1024) so
	// that a device's backlog would fill it within seconds.
	yaml := "queue:\n  max_in_flight: 16\n  read_ahead_msgs: 256\n"
	if !isolation {
		yaml += "hot:\n  enabled: false\n"
	}
	n := newNode(t, yaml)
	n.start()
	tr := newTracker(t)
	lat := &latencies{byDev: map[string][]time.Duration{}}
	for i := 0; i < 16; i++ {
		name := fmt.Sprintf("w%02d", i)
		nc, err := nats.Connect(n.url(), nats.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		_, err = nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
			device, _ := tr.enter(name, m)
			lat.observe(device, m)
			time.Sleep(hotWork)
			tr.exit(device)
			_ = m.Ack()
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// The cool phase lasts 12 s (the issue's), and with isolation until 8 s
	// after H moved back home (long enough to see its home partition stall
	// if it moved back too early). H's backlog in the hot partition (some
	// 3,000 records) drains at its handler's pace first: about 35 s here,
	// longer on a loaded machine, so the bound is generous (the test
	// asserts behaviour, not speed).
	minCool, maxCool := 12*time.Second, 90*time.Second
	if s := os.Getenv("EDGEQ_E2E_HOT_COOL"); s != "" {
		minCool, _ = time.ParseDuration(s)
	}
	warm := 3 * time.Second
	t0 := time.Now().Add(200 * time.Millisecond)
	hotStart, hotEnd := t0.Add(warm), t0.Add(warm+hotPeak)
	var endMu sync.Mutex
	endAt := hotEnd.Add(maxCool)
	if !isolation {
		endAt = hotEnd.Add(minCool)
	}
	end := func() time.Time {
		endMu.Lock()
		defer endMu.Unlock()
		return endAt
	}
	fixed := func(at time.Time) func() time.Time { return func() time.Time { return at } }
	movedBack := make(chan time.Time, 1)
	if isolation {
		go func() {
			for time.Now().Before(hotEnd.Add(maxCool)) {
				if strings.Contains(n.logs(), `device=hot-h hot=false`) {
					at := time.Now()
					movedBack <- at
					endMu.Lock()
					endAt = maxTime(hotEnd.Add(minCool), at.Add(8*time.Second))
					endMu.Unlock()
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}

	stopWatch := make(chan struct{})
	var timeline strings.Builder
	held, busiest, stalls, watched := watchWindows(n, stopWatch, &timeline)
	pubs := []*publisher{newPublisher(t, n.url(), 2000), newPublisher(t, n.url(), 2000)}
	var wg sync.WaitGroup
	for i := 0; i < hotNeighbours; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := 0
			pace(pubs[0], fmt.Sprintf("hot-n%02d", i), hotNeighbourRate, t0, end, &k)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		k := 0
		pace(pubs[1], "hot-h", hotNeighbourRate, t0, fixed(hotStart), &k)
		pace(pubs[1], "hot-h", hotPeakRate, hotStart, fixed(hotEnd), &k)
		pace(pubs[1], "hot-h", hotNeighbourRate, hotEnd, end, &k)
	}()
	wg.Wait()
	select {
	case at := <-movedBack:
		t.Logf("H moved back home %v after its hot phase ended; publishing ended %v after", at.Sub(hotEnd).Round(100*time.Millisecond),
			time.Since(hotEnd).Round(100*time.Millisecond))
	default:
	}
	sent := int(pubs[0].n.Load() + pubs[1].n.Load())
	waitFor(t, "every pub-ack", 30*time.Second, func() bool {
		if f := pubs[0].failed.Load() + pubs[1].failed.Load(); f > 0 {
			t.Fatalf("%d publishes refused", f)
		}
		return pubs[0].acked()+pubs[1].acked() == sent
	})
	acked := map[string]pubAck{}
	for _, p := range pubs {
		for payload, a := range p.ackedPayloads() {
			acked[payload] = a
		}
	}
	// H's backlog drains at its handler's pace, slower on a loaded machine.
	waitProgress(t, "every pub-acked message delivered", 60*time.Second, 15*time.Minute, tr.distinct,
		func() bool { return tr.distinct() >= len(acked) })
	close(stopWatch)
	<-watched
	tr.mu.Lock()
	for payload := range acked {
		if tr.seen[payload] == 0 {
			t.Errorf("pub-acked %s never delivered", payload)
		}
	}
	tr.mu.Unlock()

	// H's sequence numbers are contiguous from 1 and delivered in order
	// (the tracker fails on any first delivery out of order).
	lat.mu.Lock()
	hs := slices.Clone(lat.hSeqs)
	lat.mu.Unlock()
	var last uint64
	hCount := 0
	for payload := range acked {
		if strings.HasPrefix(payload, "hot-h/") {
			hCount++
		}
	}
	for _, s := range hs {
		if s > last {
			if s != last+1 {
				t.Errorf("H: Edgeq-Seq %d after %d", s, last)
			}
			last = s
		}
	}
	if int(last) != hCount {
		t.Errorf("H: last Edgeq-Seq %d, %d pub-acked", last, hCount)
	}

	// H's neighbours are the devices of its home partition (the first
	// partition H was acked in); the others share nothing with it but the
	// workers.
	home := -1
	for payload, a := range acked {
		if strings.HasPrefix(payload, "hot-h/1|") {
			home = a.Partition
		}
	}
	mates := map[string]bool{}
	for payload, a := range acked {
		if dev, _, _ := strings.Cut(payload, "/"); dev != "hot-h" && a.Partition == home {
			mates[dev] = true
		}
	}
	p99, worst, count := lat.p99(func(dev string) bool { return mates[dev] })
	allP99, allWorst, allCount := lat.p99(func(dev string) bool { return dev != "hot-h" })
	t.Logf("isolation %v: H's %d neighbours in partition %d: publish→delivery p99 %v (max %v) over %d messages; "+
		"all 40 other devices: p99 %v (max %v) over %d; H %d messages",
		isolation, len(mates), home, p99, worst, count, allP99, allWorst, allCount, hCount)
	toHot, back := 0, 0
	for _, line := range strings.Split(n.logs(), "\n") {
		if strings.Contains(line, `msg="hot-device isolation"`) && strings.Contains(line, "device=hot-h ") {
			if strings.Contains(line, "hot=true") {
				toHot++
			} else {
				back++
			}
		}
	}
	t.Logf("H moves: %d to the hot partition, %d back", toHot, back)
	if isolation && (toHot != 1 || back != 1) {
		t.Errorf("H moved to the hot partition %d times and back %d times, want 1 and 1", toHot, back)
	}
	if !isolation && toHot+back != 0 {
		t.Errorf("H moved with isolation off")
	}
	if len(mates) == 0 {
		t.Errorf("no neighbour shares H's partition %d", home)
	}
	// A stall shows as H's neighbours waiting far longer than the devices
	// of the other partitions, which share only the workers with H (H's
	// backlog would hold them seconds). hotP99Bound holds on an idle
	// machine; on a loaded one every device is late, so the neighbours are
	// held to 4x the others' p99 when that is more.
	otherP99, _, otherCount := lat.p99(func(dev string) bool { return dev != "hot-h" && !mates[dev] })
	if bound := max(hotP99Bound, 4*otherP99); p99 > bound {
		t.Errorf("H's neighbours' p99 %v, the other partitions' devices' %v over %d messages (all devices %v): want < %v",
			p99, otherP99, otherCount, allP99, bound)
	}
	if tr.problems > 0 {
		t.Errorf("%d order problems", tr.problems)
	}
	// The share (read_ahead 256 / 8) bounds what one device holds of a window.
	t.Logf("per partition, most records a window held %v; most its busiest device held %v; stalls avoided %d",
		held, busiest, *stalls)
	t.Logf("group lag by partition over time:%s", timeline.String())
	for p, b := range busiest {
		if b > 32 {
			t.Errorf("partition %s: one device held %d records of the window, share 32", p, b)
		}
	}
	v := scrapeMetrics(t, n, "")
	t.Logf("neighbour stalls avoided: %v", sumOf(v, "edgeq_group_neighbour_stalls_avoided_total"))
	if !isolation && sumOf(v, "edgeq_group_neighbour_stalls_avoided_total") == 0 {
		t.Errorf("edgeq_group_neighbour_stalls_avoided_total is 0 with isolation off")
	}
}

// Not parallel: H moves home only once its backlog has drained at its
// handler's pace, which a neighbour's CPU use stretches past maxCool.
func TestHotDeviceIsolationThroughCoolDown(t *testing.T) { runHotScenario(t, true) }

func TestHotDeviceWindowShareWithoutIsolation(t *testing.T) {
	t.Parallel() // paced by the clock, not the CPU (see TestMain)
	runHotScenario(t, false)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
