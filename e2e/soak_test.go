package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestSoak runs a node for a while at a steady rate with workers joining and
// leaving and retention active, scraping /metrics every 5s, and fails when
// RSS, goroutines or open files keep growing or an acknowledged message is
// missing at the end. It also reports write amplification: bytes the node
// caused to be written to the device (/proc/<pid>/io write_bytes) per byte of
// telemetry payload, at steady state.
//
// It runs only with EDGEQ_E2E_SOAK set to a duration (make soak; CI runs 2m):
// EDGEQ_E2E_SOAK_RATE (msg/s, default 2000), EDGEQ_E2E_SOAK_DEVICES (1000),
// EDGEQ_E2E_SOAK_CSV (a file for the samples: seconds, RSS, goroutines, fds,
// delivered), EDGEQ_E2E_SOAK_WAL (wal keys, "fsync_interval=100ms,...").
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("EDGEQ_E2E_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set EDGEQ_E2E_SOAK to a duration (make soak)")
	}
	rate := envInt("EDGEQ_E2E_SOAK_RATE", 2000)
	devices := envInt("EDGEQ_E2E_SOAK_DEVICES", 1000)
	const payloadSize = 100
	// EDGEQ_E2E_SOAK_WAL overrides wal keys: "fsync_interval=100ms,max_bytes=1GiB".
	walKeys := []string{"segment_size", "max_bytes"}
	walCfg := map[string]string{"segment_size": "256KiB", "max_bytes": "8MiB"}
	for _, kv := range strings.Split(os.Getenv("EDGEQ_E2E_SOAK_WAL"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, seen := walCfg[k]; !seen {
				walKeys = append(walKeys, k)
			}
			walCfg[k] = v
		}
	}
	var walYAML strings.Builder
	for _, k := range walKeys {
		fmt.Fprintf(&walYAML, "  %s: %s\n", k, walCfg[k])
	}
	n := newNode(t, "wal:\n"+walYAML.String()+`queue:
  ack_wait: 5s
groups:
  - {subject: telemetry.>, queue: workers, deliver: all}
`)
	n.start()
	pid := n.cmd.Process.Pid

	// Per device, which message numbers were acked and delivered.
	type devState struct {
		mu               sync.Mutex
		acked, delivered []uint64 // bitsets
	}
	st := make([]devState, devices)
	setBit := func(b *[]uint64, i int) {
		for len(*b) <= i/64 {
			*b = append(*b, 0)
		}
		(*b)[i/64] |= 1 << (i % 64)
	}
	var ackedMsgs, ackedBytes, deliveredMsgs, errReplies atomic.Int64

	// Publisher: async requests, at most 1024 outstanding, paced to rate.
	pc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	inbox := nats.NewInbox()
	window := make(chan struct{}, 1024)
	if _, err := pc.Subscribe(inbox+".*.*", func(m *nats.Msg) {
		select {
		case <-window:
		default:
		}
		f := strings.Split(m.Subject, ".")
		dev, _ := strconv.Atoi(f[len(f)-2])
		i, _ := strconv.Atoi(f[len(f)-1])
		if strings.Contains(string(m.Data), `"error"`) {
			errReplies.Add(1)
			return
		}
		s := &st[dev]
		s.mu.Lock()
		setBit(&s.acked, i)
		s.mu.Unlock()
		ackedMsgs.Add(1)
		ackedBytes.Add(payloadSize)
	}); err != nil {
		t.Fatal(err)
	}
	handle := func(m *nats.Msg) {
		var dev, i int
		if _, err := fmt.Sscanf(string(m.Data[:20]), "d%05d|%08d", &dev, &i); err == nil && dev < devices {
			s := &st[dev]
			s.mu.Lock()
			setBit(&s.delivered, i)
			s.mu.Unlock()
		}
		deliveredMsgs.Add(1)
		m.Ack()
	}
	join := func(name string) *nats.Conn {
		nc, err := nats.Connect(n.url(), nats.Name(name))
		if err != nil {
			t.Errorf("worker %s: %v", name, err)
			return nil
		}
		if _, err := nc.QueueSubscribe("telemetry.>", "workers", handle); err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
		return nc
	}
	for i := range 3 {
		if nc := join(fmt.Sprintf("steady-%d", i)); nc != nil {
			defer nc.Close()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // publisher
		defer wg.Done()
		counters := make([]int, devices)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		pad := strings.Repeat("x", payloadSize-20)
		next := 0
		start := time.Now()
		sent := 0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			due := int(time.Since(start).Seconds()*float64(rate)) - sent
			for ; due > 0; due-- {
				select {
				case window <- struct{}{}:
				case <-stop:
					return
				}
				dev := next % devices
				next++
				i := counters[dev]
				counters[dev]++
				payload := fmt.Sprintf("d%05d|%08d|%s", dev, i, pad)
				msg := &nats.Msg{Subject: fmt.Sprintf("telemetry.dev-%05d", dev), Reply: fmt.Sprintf("%s.%d.%d", inbox, dev, i), Data: []byte(payload)}
				if err := pc.PublishMsg(msg); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				sent++
			}
		}
	}()
	go func() { // workers joining and leaving
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		var churn []*nats.Conn
		for k := 0; ; k++ {
			select {
			case <-stop:
				for _, c := range churn {
					c.Close()
				}
				return
			case <-time.After(time.Duration(2+rng.IntN(6)) * time.Second):
			}
			if len(churn) < 3 && (len(churn) == 0 || rng.IntN(2) == 0) {
				if nc := join(fmt.Sprintf("churn-%d", k)); nc != nil {
					churn = append(churn, nc)
				}
			} else {
				i := rng.IntN(len(churn))
				churn[i].Close() // leaves with messages in flight: redelivered after ack_wait
				churn = append(churn[:i], churn[i+1:]...)
			}
		}
	}()

	type sample struct {
		at                    time.Duration
		rss, goroutines, fds  float64
		delivered             int64
		writeBytes, wchar     int64
		ackedBytes, ackedMsgs int64
	}
	var samples []sample
	var csv *os.File
	if p := os.Getenv("EDGEQ_E2E_SOAK_CSV"); p != "" {
		if csv, err = os.Create(p); err != nil {
			t.Fatal(err)
		}
		defer csv.Close()
		fmt.Fprintln(csv, "seconds,rss_bytes,goroutines,open_fds,delivered,write_bytes,acked_bytes")
	}
	start := time.Now()
	scrape := time.NewTicker(5 * time.Second)
	for time.Since(start) < d && !t.Failed() {
		<-scrape.C
		if !n.running() {
			t.Fatalf("node exited during the soak: %s", n.logs())
		}
		s := sample{at: time.Since(start), rss: metricValue(t, n, "edgeq_process_resident_memory_bytes"),
			goroutines: metricValue(t, n, "go_goroutines"), fds: metricValue(t, n, "edgeq_process_open_fds"),
			delivered: deliveredMsgs.Load(), ackedBytes: ackedBytes.Load(), ackedMsgs: ackedMsgs.Load()}
		s.writeBytes, s.wchar = procIO(t, pid)
		samples = append(samples, s)
		if csv != nil {
			fmt.Fprintf(csv, "%.0f,%.0f,%.0f,%.0f,%d,%d,%d\n", s.at.Seconds(), s.rss, s.goroutines, s.fds, s.delivered, s.writeBytes, s.ackedBytes)
		}
	}
	scrape.Stop()
	close(stop)
	wg.Wait()
	if len(samples) < 8 {
		t.Fatalf("only %d samples: run the soak for at least a minute", len(samples))
	}

	// Growth: the last quarter against the second (after warm-up, retention
	// active), with room for noise.
	q := len(samples) / 4
	peak := func(from, to int, v func(sample) float64) float64 {
		m := 0.0
		for _, s := range samples[from:to] {
			m = max(m, v(s))
		}
		return m
	}
	checks := []struct {
		name  string
		v     func(sample) float64
		slack float64
		ratio float64
	}{
		{"RSS", func(s sample) float64 { return s.rss }, 16 << 20, 1.25},
		{"goroutines", func(s sample) float64 { return s.goroutines }, 40, 1.2},
		{"open fds", func(s sample) float64 { return s.fds }, 16, 1.2},
	}
	for _, c := range checks {
		early, late := peak(q, 2*q, c.v), peak(3*q, len(samples), c.v)
		if early < 0 || late < 0 {
			t.Errorf("%s not in /metrics", c.name)
			continue
		}
		t.Logf("%s: peak %.0f in the second quarter, %.0f in the last", c.name, early, late)
		if late > early*c.ratio+c.slack {
			t.Errorf("%s keeps growing: %.0f in the second quarter, %.0f in the last", c.name, early, late)
		}
	}

	// Write amplification at steady state: from the middle to the end.
	a, b := samples[len(samples)/2], samples[len(samples)-1]
	if db := b.ackedBytes - a.ackedBytes; db > 0 {
		secs := (b.at - a.at).Seconds()
		t.Logf("write amplification over %.0fs at %.0f msg/s: %.2f× device bytes (write_bytes %d) per payload byte (%d payload bytes; wchar, all write calls with sockets: %.2f×, %d)",
			secs, float64(b.ackedMsgs-a.ackedMsgs)/secs, float64(b.writeBytes-a.writeBytes)/float64(db), b.writeBytes-a.writeBytes,
			db, float64(b.wchar-a.wchar)/float64(db), b.wchar-a.wchar)
	}

	// Every acknowledged message was delivered.
	missing := func() (int, string) {
		count, example := 0, ""
		for dev := range st {
			s := &st[dev]
			s.mu.Lock()
			for w, bits := range s.acked {
				var del uint64
				if w < len(s.delivered) {
					del = s.delivered[w]
				}
				if miss := bits &^ del; miss != 0 {
					for i := range 64 {
						if miss&(1<<i) != 0 {
							count++
							if example == "" {
								example = fmt.Sprintf("dev-%05d #%d", dev, w*64+i)
							}
						}
					}
				}
			}
			s.mu.Unlock()
		}
		return count, example
	}
	deadline := time.Now().Add(60 * time.Second)
	for c, _ := missing(); c > 0 && time.Now().Before(deadline); c, _ = missing() {
		time.Sleep(200 * time.Millisecond)
	}
	if c, ex := missing(); c > 0 {
		t.Errorf("%d acknowledged messages never delivered, e.g. %s", c, ex)
	}
	t.Logf("soak %v at %d msg/s over %d devices: %d acked, %d deliveries, %d error replies, %d samples",
		d, rate, devices, ackedMsgs.Load(), deliveredMsgs.Load(), errReplies.Load(), len(samples))
	// A floor so that a soak that hardly ran does not pass; not a speed
	// check (benchmarks measure throughput): half the asked rate failed
	// runs on a loaded machine.
	if want := int64(float64(rate) * d.Seconds() * 0.1); ackedMsgs.Load() < want {
		t.Errorf("only %d messages acked, under a tenth of the asked rate", ackedMsgs.Load())
	}
}

// procIO reads write_bytes (bytes sent to the storage layer) and wchar
// (bytes passed to write calls) of a process.
func procIO(t testing.TB, pid int) (writeBytes, wchar int64) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		t.Logf("proc io: %v", err)
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		x, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "write_bytes":
			writeBytes = x
		case "wchar":
			wchar = x
		}
	}
	return writeBytes, wchar
}
