package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
	"edgeq/gateway/metrics/lint"
	"edgeq/wal"
)

// startMetricsNode runs a node on loopback ports with its data in a temp dir.
func startMetricsNode(t testing.TB, mod func(*config.Config)) *Node {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.NodeID = "metrics-test"
	cfg.NATS.Listen = "127.0.0.1:0"
	cfg.HTTP.Listen = "127.0.0.1:0"
	if mod != nil {
		mod(&cfg)
	}
	n, err := NewNode(cfg, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(5 * time.Second) })
	return n
}

// scrape renders /metrics through the handler.
func scrape(t testing.TB, n *Node) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	n.handleMetrics(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d", rec.Code)
	}
	return rec.Body.Bytes()
}

func values(t testing.TB, n *Node) map[string]float64 {
	t.Helper()
	body := scrape(t, n)
	if err := lint.Check(body, lint.Policy{Prefix: "edgeq_"}).Err(); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	v, err := lint.Values(body)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsEndpointToken: /metrics takes the bearer token like /v1/status,
// and what it serves lints clean.
func TestMetricsEndpointToken(t *testing.T) {
	n := startMetricsNode(t, func(c *config.Config) { c.HTTP.Token = "s3cret" })
	tests := []struct {
		name, path, auth string
		want             int
	}{
		{"metrics without token", "/metrics", "", http.StatusUnauthorized},
		{"metrics with a wrong token", "/metrics", "Bearer nope", http.StatusUnauthorized},
		{"metrics with the token", "/metrics", "Bearer s3cret", http.StatusOK},
		{"status with the token", "/v1/status", "Bearer s3cret", http.StatusOK},
		{"healthz needs none", "/healthz", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+n.HTTPAddr()+tt.path, nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%s: %d, want %d: %s", tt.path, resp.StatusCode, tt.want, body)
			}
			if tt.path == "/metrics" && tt.want == http.StatusOK {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
					t.Errorf("content type %q", ct)
				}
				if err := lint.Check(body, lint.Policy{Prefix: "edgeq_"}).Err(); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(body), `edgeq_node_info{node="metrics-test",version="test"} 1`) {
					t.Error("no edgeq_node_info for this node")
				}
			}
			if tt.path == "/v1/status" {
				var st apiv1.Status
				if err := json.Unmarshal(body, &st); err != nil {
					t.Fatal(err)
				}
				if st.Node != "metrics-test" || st.Time.IsZero() || len(st.Partitions) != 10 {
					t.Errorf("status: node %q time %v partitions %d", st.Node, st.Time, len(st.Partitions))
				}
			}
		})
	}
}

// ackMember acks every delivery right away (or blocks in Deliver while
// hold is set, to stall its group's goroutine).
type ackMember struct {
	reg       *groups.Registry
	delivered atomic.Int64
	hold      chan struct{} // nil: never block
	entered   chan struct{}
}

func (m *ackMember) Deliver(d *groups.Delivery) bool {
	m.delivered.Add(1)
	if m.hold != nil {
		select {
		case m.entered <- struct{}{}:
		default:
		}
		<-m.hold
	}
	h := d.Ack
	go func() { _ = m.reg.Ack(groups.Ack{Handle: h, Kind: groups.AckDone}) }()
	return true
}

func appendN(t testing.TB, n *Node, prefix string, count int) {
	t.Helper()
	if err := appendRecords(n, prefix, count); err != nil {
		t.Fatal(err)
	}
}

// appendRecords appends count 10-byte records over 7 devices, each durable
// before the next.
func appendRecords(n *Node, prefix string, count int) error {
	for i := range count {
		dev := fmt.Sprintf("%s-%d", prefix, i%7)
		if _, err := n.ingest.Append(context.Background(), &wal.Record{Device: dev, Source: "test", Payload: []byte("0123456789")}); err != nil {
			return err
		}
	}
	return nil
}

// waitMetric polls /metrics until key reaches want (group stats refresh
// about once a second), and fails if it ever goes past it.
func waitMetric(t testing.TB, n *Node, key string, want float64) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := values(t, n)
		switch got := v[key]; {
		case got == want:
			return v
		case got > want:
			t.Fatalf("%s = %v, past %v", key, got, want)
		case time.Now().After(deadline):
			t.Fatalf("%s = %v, want %v", key, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMetricsPromtool: a running node's /metrics, with a queue group that
// delivered and traffic in the log, passes `promtool check metrics`.
func TestMetricsPromtool(t *testing.T) {
	n := startMetricsNode(t, nil)
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "promtool"}
	if _, err := n.queues.Join(key, "m1", &ackMember{reg: n.queues}, 64); err != nil {
		t.Fatal(err)
	}
	appendN(t, n, "promtool", 20)
	waitMetric(t, n, lint.Key("edgeq_group_acked_total", "filter", key.Filter, "queue", key.Queue), 20)
	lint.Promtool(t, scrape(t, n))
}

// TestMetricsCountExactly: N appends acked by a member move ingest, log
// appends, deliveries, acks and the latency histogram's count by exactly N.
func TestMetricsCountExactly(t *testing.T) {
	n := startMetricsNode(t, nil)
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "exact"}
	m := &ackMember{reg: n.queues}
	if _, err := n.queues.Join(key, "m1", m, 64); err != nil {
		t.Fatal(err)
	}
	g := []string{"filter", key.Filter, "queue", key.Queue}
	before := values(t, n)
	const N = 137
	appendN(t, n, "exact", N)
	v := waitMetric(t, n, lint.Key("edgeq_group_acked_total", g...), N)
	var appends float64
	for p := range 10 {
		appends += v[lint.Key("edgeq_log_appends_total", "partition", fmt.Sprint(p))] - before[lint.Key("edgeq_log_appends_total", "partition", fmt.Sprint(p))]
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"ingest messages", v[lint.Key("edgeq_ingest_messages_total", "source", "test")], N},
		{"ingest bytes", v[lint.Key("edgeq_ingest_bytes_total", "source", "test")], 10 * N},
		{"log appends", appends, N},
		{"delivered", v[lint.Key("edgeq_group_delivered_total", g...)], N},
		{"acked", v[lint.Key("edgeq_group_acked_total", g...)], N},
		{"redeliveries", v[lint.Key("edgeq_group_redeliveries_total", g...)], 0},
		{"latency count", v[lint.Key("edgeq_group_delivery_latency_seconds_count", g...)], N},
		{"in flight", v[lint.Key("edgeq_group_in_flight", g...)], 0},
		{"member deliveries", float64(m.delivered.Load()), N},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestMetricsTopDevicesBounded: of thousands of devices only the configured
// top-N carry a device label.
func TestMetricsTopDevicesBounded(t *testing.T) {
	for _, top := range []int{0, 3, 10} {
		t.Run(fmt.Sprint(top), func(t *testing.T) {
			n := startMetricsNode(t, func(c *config.Config) { c.Metrics.TopDevices = top })
			for i := range 2000 {
				n.ingest.AppendAsync(&wal.Record{Device: fmt.Sprintf("d%d", i), Source: "test", Payload: []byte("x")}, func(wal.Position, error) {})
			}
			// AppendAsync observes before it returns: Evaluate sees them all.
			n.ingest.hotMu.Lock()
			n.ingest.hot.Evaluate(time.Now())
			n.ingest.hotMu.Unlock()
			got := 0
			for k := range values(t, n) {
				if strings.Contains(k, `device="`) && !strings.HasPrefix(k, "edgeq_device_disk_") {
					got++
				}
			}
			if got != top {
				t.Errorf("%d series with a device label, want %d", got, top)
			}
		})
	}
}

// blockingWriter is a ResponseWriter whose Write blocks until released: a
// scraper that stopped reading.
type blockingWriter struct {
	header  http.Header
	entered chan struct{}
	release chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Write(b []byte) (int, error) {
	close(w.entered)
	<-w.release
	return len(b), nil
}

// TestMetricsScrapeBlocksNothing: a scrape holds no lock that ingest or
// delivery needs while its page goes out (a slow scraper stalls only
// itself), and it never waits for a queue group (a group stuck in a
// member's Deliver does not stall the scrape).
func TestMetricsScrapeBlocksNothing(t *testing.T) {
	n := startMetricsNode(t, nil)
	m := &ackMember{reg: n.queues}
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "flowing"}
	if _, err := n.queues.Join(key, "m1", m, 64); err != nil {
		t.Fatal(err)
	}
	t.Run("slow scraper", func(t *testing.T) {
		w := &blockingWriter{header: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
		var once sync.Once
		release := func() { once.Do(func() { close(w.release) }) }
		t.Cleanup(release) // also on failure, so the node can shut down
		done := make(chan struct{})
		go func() { defer close(done); n.handleMetrics(w, httptest.NewRequest("GET", "/metrics", nil)) }()
		<-w.entered
		// The scrape is stuck writing: ingest, delivery and acks go on.
		appended := make(chan error, 1)
		go func() { appended <- appendRecords(n, "flow", 50) }()
		select {
		case err := <-appended:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("appends blocked while a scrape was stuck writing")
		}
		waitUntil(t, "50 deliveries while a scrape is stuck", 20*time.Second, func() bool { return m.delivered.Load() == 50 })
		release()
		<-done
	})
	t.Run("stuck group", func(t *testing.T) {
		stuck := &ackMember{reg: n.queues, hold: make(chan struct{}), entered: make(chan struct{}, 1)}
		sk := groups.GroupKey{Filter: "telemetry.stuck-0", Queue: "stuck"}
		if _, err := n.queues.Join(sk, "s1", stuck, 8); err != nil {
			t.Fatal(err)
		}
		appendN(t, n, "stuck", 1)
		<-stuck.entered // the group's goroutine is inside Deliver
		v := values(t, n)
		if _, ok := v[lint.Key("edgeq_group_members", "filter", sk.Filter, "queue", sk.Queue)]; !ok {
			t.Error("the stuck group is not in the scrape")
		}
		close(stuck.hold)
	})
}

// TestMetricsStatusSameSnapshot: /v1/status and /metrics tell the same
// story: the group's counters, lag and device health come from one kind of
// snapshot.
func TestMetricsStatusSameSnapshot(t *testing.T) {
	n := startMetricsNode(t, nil)
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "same"}
	if err := n.queues.Declare(groups.GroupConfig{Key: key, Core: groups.DefaultCoreConfig()}); err != nil {
		t.Fatal(err)
	}
	appendN(t, n, "lagging", 20) // no member: all of it is lag
	var lag float64
	waitUntil(t, "lag of 20", 20*time.Second, func() bool {
		lag = 0
		for k, x := range values(t, n) {
			if strings.HasPrefix(k, "edgeq_group_lag{") && strings.Contains(k, `queue="same"`) {
				lag += x
			}
		}
		return lag == 20
	})
	st := n.api.Status()
	for _, gs := range st.Groups {
		if gs.Queue == key.Queue && gs.Lag != uint64(lag) {
			t.Errorf("status lag %d, metrics %v", gs.Lag, lag)
		}
	}
	if st.Device.CPUs == nil && len(st.Device.Failed) == 0 {
		t.Error("device health has neither CPUs nor failed collectors")
	}
}

var _ groups.Member = (*ackMember)(nil)

// benchNode is the node of the scrape benchmarks: 8 partitions (+2 hot),
// 10 declared queue groups and devices known to the log and the hot-device
// detector.
func benchNode(b *testing.B, devices int) *Node {
	n := startMetricsNode(b, func(c *config.Config) {
		c.WAL.Durability = wal.DurabilityNone
		for i := range 10 {
			c.Groups = append(c.Groups, config.Group{Subject: "telemetry.>", Queue: fmt.Sprintf("g%02d", i)})
		}
	})
	var wg sync.WaitGroup
	for i := range devices {
		wg.Add(1)
		n.ingest.AppendAsync(&wal.Record{Device: fmt.Sprintf("sensor-%05d", i), Source: "bench", Payload: []byte("{}")},
			func(_ wal.Position, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
	}
	wg.Wait()
	n.ingest.hotMu.Lock()
	n.ingest.hot.Evaluate(time.Now())
	n.ingest.hotMu.Unlock()
	if st := n.log.Stats(); st.Devices != devices {
		b.Fatalf("%d devices known, want %d", st.Devices, devices)
	}
	return n
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkScrape is one /metrics request with 8 partitions, 10 groups and
// 10,000 known devices: "full" is what a scraper gets (gather, run the
// device collectors on this machine's /proc and /sys, render); the others
// split it up.
func BenchmarkScrape(b *testing.B) {
	n := benchNode(b, 10_000)
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.handleMetrics(w, req)
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.snapshot(10, false)
		}
	})
	b.Run("device-collectors", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.metrics.deviceSamples(time.Now())
		}
	})
	b.Run("top-devices-lock-hold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.ingest.hotView(10)
		}
	})
}

// BenchmarkIngestWhileScraping appends through the node's ingest (the path
// NATS, HTTP and the bridges take, hot-device detector included; durability
// none, so the figure is the in-memory path that a lock would show up in)
// with 10,000 known devices: alone, with a goroutine scraping /metrics back
// to back (a worst case: one of two cores busy scraping), and the same with
// the top devices off (no walk under the detector's lock), which separates
// lock waits from CPU contention. Reported: ns per append, the 99th
// percentile, and the scrapes done meanwhile.
func BenchmarkIngestWhileScraping(b *testing.B) {
	n := benchNode(b, 10_000)
	for _, mode := range []struct {
		name     string
		scraping bool
		top      int
	}{{"idle", false, 10}, {"scraping", true, 10}, {"scraping-no-top-devices", true, 0}} {
		b.Run(mode.name, func(b *testing.B) {
			n.metrics.top = mode.top
			stop := make(chan struct{})
			var scrapes atomic.Int64
			var wg sync.WaitGroup
			if mode.scraping {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := &discardWriter{h: http.Header{}}
					req := httptest.NewRequest("GET", "/metrics", nil)
					for {
						select {
						case <-stop:
							return
						default:
						}
						n.handleMetrics(w, req)
						scrapes.Add(1)
					}
				}()
			}
			lat := make([]time.Duration, 0, 1<<16)
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := n.ingest.Append(context.Background(), &wal.Record{Device: fmt.Sprintf("sensor-%05d", i%10_000), Source: "bench", Payload: []byte("{}")}); err != nil {
					b.Fatal(err)
				}
				if len(lat) < cap(lat) {
					lat = append(lat, time.Since(start))
				}
				i++
			}
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
			b.ReportMetric(float64(scrapes.Load()), "scrapes")
		})
	}
}
