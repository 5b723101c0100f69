package e2e

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkClusterFailover measures, per iteration on a fresh three-node
// loopback cluster under a steady load, the time from the leader's failure
// to the first delivery by its successor (a delivery whose ack subject names
// a new group instance):
//
//	kill9:  kill -9; the kernel closes the leader's sockets, the survivors notice at once
//	frozen: SIGSTOP; the leader falls silent and the 1s failure timeout decides
//
// go test -run '^$' -bench ClusterFailover -benchtime 10x ./e2e
func BenchmarkClusterFailover(b *testing.B) {
	for _, how := range []string{"kill9", "frozen"} {
		b.Run(how, func(b *testing.B) {
			var took []time.Duration
			for i := 0; i < b.N; i++ {
				took = append(took, failoverOnce(b, how == "frozen"))
			}
			slices.Sort(took)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
			b.ReportMetric(float64(took[0].Milliseconds()), "min-ms")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
			b.Logf("%s failover over %d runs: %v", how, len(took), took)
		})
	}
}

func failoverOnce(b *testing.B, freeze bool) time.Duration {
	b.Helper()
	nodes := clusterOf(b, "")
	a, bn, c := nodes[0], nodes[1], nodes[2]
	defer func() {
		for _, n := range nodes {
			if n.running() {
				n.cmd.Process.Signal(syscall.SIGCONT)
				n.kill()
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for leaderOf("telemetry.> workers", a, bn, c) != "gw-c" {
		if time.Now().After(deadline) {
			b.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var mu sync.Mutex
	first := map[string]time.Time{}
	for _, n := range []*node{a, bn} {
		nc := connect(b, n.url(), "w")
		if _, err := nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
			mu.Lock()
			if _, ok := first[gidOf(m.Reply)]; !ok {
				first[gidOf(m.Reply)] = time.Now()
			}
			mu.Unlock()
			m.Ack()
		}); err != nil {
			b.Fatal(err)
		}
		nc.Flush()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range []*node{a, bn} {
		nc := connect(b, n.url(), "p")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				nc.Publish(fmt.Sprintf("telemetry.d%d", i%20), []byte("x"))
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for {
		mu.Lock()
		n := len(first)
		mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	before := len(first)
	mu.Unlock()
	failedAt := time.Now()
	if freeze {
		c.cmd.Process.Signal(syscall.SIGSTOP)
	} else {
		c.kill()
	}
	for time.Since(failedAt) < 30*time.Second {
		mu.Lock()
		for _, at := range first {
			if len(first) > before && at.After(failedAt) {
				d := at.Sub(failedAt)
				mu.Unlock()
				return d
			}
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("no delivery by a new leader within 30s")
	return 0
}
