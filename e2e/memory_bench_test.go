package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The memory benchmarks: the node's peak resident set (VmHWM) while many
// queue groups lag, and while one group drains a backlog. Not in CI (they
// take minutes); `make mem` runs both:
//
//	go test -count=1 -run '^$' -bench '^BenchmarkMemory' -benchtime 1x -v ./e2e
//
// EDGEQ_E2E_BENCH_RECORDS is the number of records published (default
// 200000, 150 B over 1,000 devices), EDGEQ_E2E_MEM_GROUPS the lagging
// groups (default 32), EDGEQ_E2E_MEM_CONFIG YAML added to the node's
// configuration (e.g. "queue: {read_ahead_budget: 4MiB}"), EDGEQ_E2E_BIN
// another edgeq binary (e.g. a build of an older commit, for a before/after).

const memBenchSize = 150

// BenchmarkMemoryLaggingGroups: groups each with one member that takes its
// credit (max_in_flight, 256) and never acks, then the records are
// published; VmHWM once every group has read what it may.
func BenchmarkMemoryLaggingGroups(b *testing.B) {
	total := benchEnvInt(b, "EDGEQ_E2E_BENCH_RECORDS", 200000)
	groups := benchEnvInt(b, "EDGEQ_E2E_MEM_GROUPS", 32)
	n := newNode(b, os.Getenv("EDGEQ_E2E_MEM_CONFIG"))
	n.start()
	idle := procStatusBytes(b, n.cmd.Process.Pid, "VmRSS:")
	var got atomic.Int64
	for i := range groups {
		nc, err := nats.Connect(n.url())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		// No ack: each delivery stays in flight; the member's credit runs out.
		sub, err := nc.QueueSubscribe("telemetry.>", fmt.Sprintf("lag%02d", i), func(*nats.Msg) { got.Add(1) })
		if err != nil {
			b.Fatal(err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		if err := nc.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "groups' members joined", 60*time.Second, func() bool {
		return metricSum(b, n, "edgeq_group_members") >= float64(groups)
	})
	start := time.Now()
	storeBacklogSized(b, n, total, 1000, memBenchSize)
	pub := time.Since(start)
	// Settled: every group's held records unchanged over a second.
	var held float64 = -1
	waitFor(b, "groups settled", 300*time.Second, func() bool {
		h := metricSum(b, n, "edgeq_group_pending") + metricSum(b, n, "edgeq_group_in_flight")
		same := h == held
		held = h
		if !same {
			time.Sleep(time.Second)
		}
		return same
	})
	peak := procStatusBytes(b, n.cmd.Process.Pid, "VmHWM:")
	rss := procStatusBytes(b, n.cmd.Process.Pid, "VmRSS:")
	logGCTrace(b, n)
	if d := os.Getenv("EDGEQ_E2E_MEM_HOLD"); d != "" { // keep the node up for a look (e.g. a heap profile)
		hold, _ := time.ParseDuration(d)
		time.Sleep(hold)
	}
	b.ReportMetric(float64(peak)/(1<<20), "VmHWM_MiB")
	b.ReportMetric(held, "records_held")
	b.Logf("%d groups lagging, %d records of %d B over 1000 devices published in %v: VmHWM %.1f MiB, VmRSS %.1f MiB (idle before %.1f MiB), records held %.0f, delivered %d, read-ahead budget in use %.1f MiB, re-reads %.0f",
		groups, total, memBenchSize, pub.Round(time.Millisecond), mib(peak), mib(rss), mib(idle), held, got.Load(),
		metricSum(b, n, "edgeq_readahead_used_bytes")/(1<<20), metricSum(b, n, "edgeq_readahead_rereads_total"))
}

// BenchmarkMemoryDrain: the records are stored first (one declared group,
// deliver all), then 4 workers on one connection each drain them, acking
// every message; VmHWM once all are acked.
func BenchmarkMemoryDrain(b *testing.B) {
	total := benchEnvInt(b, "EDGEQ_E2E_BENCH_RECORDS", 200000)
	cfg := "groups:\n  - {subject: 'telemetry.>', queue: drain, deliver: all}\n" + os.Getenv("EDGEQ_E2E_MEM_CONFIG")
	n := newNode(b, cfg)
	n.start()
	storeBacklogSized(b, n, total, 1000, memBenchSize)
	stored := procStatusBytes(b, n.cmd.Process.Pid, "VmHWM:")
	var acked atomic.Int64
	start := time.Now()
	for range 4 {
		nc, err := nats.Connect(n.url())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		sub, err := nc.QueueSubscribe("telemetry.>", "drain", func(m *nats.Msg) {
			if m.Respond(nil) == nil {
				acked.Add(1)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		_ = sub.SetPendingLimits(-1, -1)
	}
	waitFor(b, "backlog drained", 900*time.Second, func() bool { return acked.Load() >= int64(total) })
	took := time.Since(start)
	peak := procStatusBytes(b, n.cmd.Process.Pid, "VmHWM:")
	logGCTrace(b, n)
	b.ReportMetric(float64(peak)/(1<<20), "VmHWM_MiB")
	b.ReportMetric(float64(total)/took.Seconds(), "msgs/s")
	b.Logf("%d records of %d B over 1000 devices drained by 4 workers in %v (%.0f msgs/s): VmHWM %.1f MiB (%.1f MiB after storing)",
		total, memBenchSize, took.Round(time.Millisecond), float64(total)/took.Seconds(), mib(peak), mib(stored))
}

// logGCTrace logs the node's last garbage collections when it runs with
// GODEBUG=gctrace=1 (set it in the environment of go test).
func logGCTrace(b *testing.B, n *node) {
	var gc []string
	for _, l := range strings.Split(n.logs(), "\n") {
		if strings.HasPrefix(l, "gc ") {
			gc = append(gc, l)
		}
	}
	if len(gc) > 0 {
		b.Logf("last collections:\n%s", strings.Join(gc[max(len(gc)-8, 0):], "\n"))
	}
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// storeBacklogSized publishes total records of size bytes round-robin over
// devices with 1000 acks outstanding and waits until all are stored.
func storeBacklogSized(b *testing.B, n *node, total, devices, size int) {
	nc, err := nats.Connect(n.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	window := make(chan struct{}, 1000)
	var acked atomic.Int64
	inbox := nats.NewInbox()
	if _, err := nc.Subscribe(inbox, func(*nats.Msg) { acked.Add(1); <-window }); err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", size))
	subjects := make([]string, devices)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("telemetry.m-%04d", i)
	}
	for i := range total {
		window <- struct{}{}
		if err := nc.PublishMsg(&nats.Msg{Subject: subjects[i%devices], Reply: inbox, Data: payload}); err != nil {
			b.Fatal(err)
		}
	}
	waitFor(b, "records stored", 600*time.Second, func() bool { return acked.Load() >= int64(total) })
}
