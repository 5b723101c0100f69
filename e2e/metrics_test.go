package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"edgeq/gateway/metrics/lint"
)

// scrapeMetrics GETs /metrics (with a bearer token when given), checks it
// with the linter and returns the samples by lint.Key.
func scrapeMetrics(t *testing.T, n *node, token string) map[string]float64 {
	t.Helper()
	code, body := getWithToken(t, n.httpURL()+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d: %s", code, body)
	}
	if err := lint.Check(body, lint.Policy{Prefix: "edgeq_"}).Err(); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	v, err := lint.Values(body)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sumOf adds the samples of one metric name over all its label sets.
func sumOf(v map[string]float64, name string) float64 {
	var s float64
	for k, x := range v {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += x
		}
	}
	return s
}

// TestMetricsMoveExactly publishes N messages through NATS to a worker that
// acks them, and checks that the ingest, log, delivery, ack and latency
// histogram counts moved by exactly N — no more, once settled — and that
// /metrics wants the bearer token like the rest of the API.
func TestMetricsMoveExactly(t *testing.T) {
	const token = "m3trics"
	n := newNode(t, "http:\n  token: "+token+"\n")
	n.start()
	req, _ := http.NewRequest("GET", n.httpURL()+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	tr := newTracker(t)
	startWorker(t, n.url(), "w1", tr, func() {})
	g := []string{"filter", "telemetry.>", "queue", "workers"}
	acked := lint.Key("edgeq_group_acked_total", g...)
	var before map[string]float64
	waitFor(t, "the worker's group in /metrics", 10*time.Second, func() bool {
		before = scrapeMetrics(t, n, token)
		_, ok := before[acked]
		return ok
	})

	const N = 300
	p := newPublisher(t, n.url(), 64)
	for i := range N {
		p.publish(fmt.Sprintf("meter-%d", i%10), fmt.Sprintf("%08d", i)) // 8 bytes each
	}
	waitFor(t, "every publish acked and delivered", 30*time.Second, func() bool { return p.acked() == N && tr.distinct() == N })
	// Group counters are refreshed about once a second: wait until the acks
	// show, then every count must have moved by exactly N (a counter that
	// counted twice would already be past it).
	var after map[string]float64
	waitFor(t, "acks in /metrics", 20*time.Second, func() bool {
		after = scrapeMetrics(t, n, token)
		return after[acked]-before[acked] >= N
	})

	delta := func(key string) float64 { return after[key] - before[key] }
	checks := []struct {
		name      string
		got, want float64
	}{
		{"ingest messages (nats)", delta(lint.Key("edgeq_ingest_messages_total", "source", "nats")), N},
		{"ingest bytes (nats)", delta(lint.Key("edgeq_ingest_bytes_total", "source", "nats")), 8 * N},
		{"ingest errors (nats)", delta(lint.Key("edgeq_ingest_errors_total", "source", "nats")), 0},
		{"log appends", sumOf(after, "edgeq_log_appends_total") - sumOf(before, "edgeq_log_appends_total"), N},
		{"delivered", delta(lint.Key("edgeq_group_delivered_total", g...)), N},
		{"acked", delta(acked), N},
		{"redeliveries", delta(lint.Key("edgeq_group_redeliveries_total", g...)), 0},
		{"latency histogram count", delta(lint.Key("edgeq_group_delivery_latency_seconds_count", g...)), N},
		{"latency histogram +Inf", delta(lint.Key("edgeq_group_delivery_latency_seconds_bucket", append(g, "le", "+Inf")...)), N},
		{"in flight", after[lint.Key("edgeq_group_in_flight", g...)], 0},
		{"lag", sumOf(after, "edgeq_group_lag"), 0},
		{"devices", after["edgeq_log_devices"] - before["edgeq_log_devices"], 10},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s moved by %v, want %v", c.name, c.got, c.want)
		}
	}
	// Group stats are taken on request now, so "acks in /metrics" may hold
	// at its first scrape: count one more scrape exactly instead of
	// assuming several happened.
	if got := after["edgeq_metrics_scrapes_total"]; got < 1 {
		t.Errorf("edgeq_metrics_scrapes_total %v after at least two scrapes", got)
	}
	if got, want := scrapeMetrics(t, n, token)["edgeq_metrics_scrapes_total"], after["edgeq_metrics_scrapes_total"]+1; got != want {
		t.Errorf("edgeq_metrics_scrapes_total %v after one more scrape, want %v", got, want)
	}

	// The same picture for a person, refreshed: plain text into a pipe.
	out, err := runCmd(edgeqBin, "status", "--http", n.httpURL(), "--token", token, "--watch", "--interval", "200ms", "--count", "2")
	if err != nil {
		t.Fatalf("edgeq status --watch: %v\n%s", err, out)
	}
	if strings.Count(out, "node e2e-node  ready") != 2 || strings.Contains(out, "\x1b") {
		t.Errorf("want two plain frames:\n%s", out)
	}
	for _, want := range []string{"DELIVERED/S", "workers", "device cpu", "meter-"} {
		if !strings.Contains(out, want) {
			t.Errorf("edgeq status --watch shows no %q:\n%s", want, out)
		}
	}
}

// TestMetricsMissingProcSysRoot: with proc and sys roots that do not exist,
// the device collectors report edgeq_collector_success 0, the scrape still
// answers 200 with the broker metrics, /v1/status lists the failed
// collectors, and the node logs each failure once, not on every scrape.
func TestMetricsMissingProcSysRoot(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	n := newNode(t, fmt.Sprintf("metrics:\n  proc_root: %s\n  sys_root: %s\n", missing, missing))
	n.start()
	if out, err := runCmd(edgeqBin, "pub", "--server", n.url(), "probe-1", "12345"); err != nil {
		t.Fatalf("edgeq pub: %v %s", err, out)
	}
	var v map[string]float64
	for range 3 {
		v = scrapeMetrics(t, n, "")
	}
	for _, c := range []string{"cpu", "load", "memory", "uptime", "process", "thermal", "network", "disk"} {
		if got, ok := v[lint.Key("edgeq_collector_success", "collector", c)]; !ok || got != 0 {
			t.Errorf(`edgeq_collector_success{collector=%q} = %v (present %v), want 0`, c, got, ok)
		}
	}
	// The data directory itself is real: its filesystem is still reported.
	if got := v[lint.Key("edgeq_collector_success", "collector", "filesystem")]; got != 1 {
		t.Errorf("filesystem collector success %v, want 1", got)
	}
	if got := v[lint.Key("edgeq_ingest_messages_total", "source", "nats")]; got != 1 {
		t.Errorf("ingest messages %v, want 1", got)
	}
	if v["edgeq_log_bytes"] <= 0 || v["edgeq_node_ready"] != 1 {
		t.Errorf("broker metrics missing: log bytes %v, ready %v", v["edgeq_log_bytes"], v["edgeq_node_ready"])
	}
	if _, ok := v["edgeq_device_load1"]; ok {
		t.Error("a failed collector's sample is present")
	}

	out, err := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
	if err != nil {
		t.Fatalf("edgeq status --json: %v %s", err, out)
	}
	var st struct {
		Device struct {
			Failed []string `json:"failed_collectors"`
			Load1  *float64 `json:"load1"`
		} `json:"device"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Device.Failed) != 8 || st.Device.Load1 != nil {
		t.Errorf("status device health: failed %v, load1 %v", st.Device.Failed, st.Device.Load1)
	}
	logged := 0
	for _, line := range strings.Split(n.logs(), "\n") {
		if strings.Contains(line, `msg="device metrics collector failed"`) && strings.Contains(line, "collector=cpu ") {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("cpu collector failure logged %d times over 4 collections, want once:\n%s", logged, n.logs())
	}
}
