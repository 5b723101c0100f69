package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestJetStreamBenchOrdered runs `edgeq bench --mode jetstream` at a small
// count against a node and a real nats-server: the bench's own checks hold
// where the server guarantees order (edgeq's one pull consumer, the peer's
// partitions with MaxAckPending 1), every message arrives in each scenario,
// and nothing errs. Nothing about speed is asserted.
func TestJetStreamBenchOrdered(t *testing.T) {
	peer := newJSServer(t)
	peer.start()
	n := newNode(t, "")
	n.start()
	cmd := exec.Command(edgeqBin, "bench", "--mode", "jetstream", "--server", n.url(), "--peer", peer.url(),
		"--msgs", "4000", "--devices", "100", "--size", "150", "--publishers", "2", "--workers", "4", "--window", "64", "--json")
	timer := time.AfterFunc(5*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("edgeq bench: %v\n%s\n%s", err, out, stderr.String())
	}
	var rep struct {
		Results []struct {
			Name          string
			Msgs          int
			DeliverPerSec float64 `json:"deliver_per_sec"`
			OutOfOrder    int64   `json:"out_of_order"`
			Overlaps      int64   `json:"overlaps"`
			Errors        int64   `json:"errors"`
			ServerCPU     float64 `json:"server_cpu_s"`
		} `json:"results"`
		Ratios map[string]float64 `json:"ratios"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Results) != 3 || len(rep.Ratios) != 2 {
		t.Fatalf("bench output (%v):\n%s", err, out)
	}
	for i, r := range rep.Results {
		ordered := i != 1 // the peer's plain pull consumer promises no order
		if r.Msgs != 4000 || r.DeliverPerSec <= 0 || r.Errors != 0 || ordered && (r.OutOfOrder != 0 || r.Overlaps != 0) {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if r.ServerCPU < 0 {
			t.Errorf("%s: server CPU not read from /proc", r.Name)
		}
	}
	t.Logf("%s", out)
}
