package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// idleGroup is the part of /v1/status's groups that TestLagZeroWhenIdle reads.
type idleGroup struct {
	Queue        string            `json:"queue"`
	Pending      int               `json:"pending"`
	InFlight     int               `json:"in_flight"`
	Lag          uint64            `json:"lag"`
	Acked        uint64            `json:"acked"`
	PartitionLag map[string]uint64 `json:"partition_lag"`
	LatencyP99ms float64           `json:"latency_p99_ms"`
}

func groupsOf(t *testing.T, n *node) []idleGroup {
	t.Helper()
	resp, err := n.httpClient().Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Groups []idleGroup `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Groups
}

// TestLagZeroWhenIdle: once a worker has acked everything, /v1/status
// says lag 0 in every partition (it crept up to 1–2 per partition with
// nothing pending).
func TestLagZeroWhenIdle(t *testing.T) {
	n := newNode(t, "")
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	pub := newPublisher(t, n.url(), 64)
	total := 0
	for round := 0; round < 5; round++ {
		for i := 0; i < 100; i++ {
			pub.publish(fmt.Sprintf("dev-%d", i%40), fmt.Sprintf("r%d-%d", round, i))
			total++
		}
		waitFor(t, "the round delivered", 30*time.Second, func() bool { return tr.distinct() == total })
		time.Sleep(200 * time.Millisecond)
	}
	var last []idleGroup
	waitFor(t, "lag 0 with nothing pending", 30*time.Second, func() bool {
		last = groupsOf(t, n)
		for _, g := range last {
			if g.Queue == "workers" && g.Acked == uint64(total) && g.Pending == 0 && g.InFlight == 0 && g.Lag == 0 && len(g.PartitionLag) == 0 {
				return true
			}
		}
		t.Logf("%+v", last)
		time.Sleep(time.Second)
		return false
	})
}
