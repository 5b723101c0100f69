package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Sync points on what the node reports, for tests whose other side (a CLI
// process, a serial port) gets ready on its own schedule: a sleep is too
// short on a loaded machine.

// readStatus reads /v1/status of a node without an HTTP token into v; false
// while the node does not answer.
func readStatus(n *node, v any) bool {
	resp, err := n.httpClient().Get(n.httpURL() + "/v1/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && json.Unmarshal(body, v) == nil
}

// waitMembers waits until queue has at least want members on n. A group
// that is not declared starts at deliver: new, so a publish before its
// first member joins is never delivered to it.
func waitMembers(t *testing.T, n *node, queue string, want int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d members in queue %s", want, queue), 30*time.Second, func() bool {
		var st struct {
			Groups []struct {
				Queue   string `json:"queue"`
				Members int    `json:"members"`
			} `json:"groups"`
		}
		if !readStatus(n, &st) {
			return false
		}
		for _, g := range st.Groups {
			if g.Queue == queue && g.Members >= want {
				return true
			}
		}
		return false
	})
}

// waitSerialOpen waits until the node has the serial port name open.
func waitSerialOpen(t *testing.T, n *node, name string) {
	t.Helper()
	waitFor(t, "serial port "+name+" open", 30*time.Second, func() bool {
		var st struct {
			Serial []struct {
				Name string `json:"name"`
				Open bool   `json:"open"`
			} `json:"serial"`
		}
		if !readStatus(n, &st) {
			return false
		}
		for _, s := range st.Serial {
			if s.Name == name && s.Open {
				return true
			}
		}
		return false
	})
}

// publishUntil publishes with pub every 250ms until got delivers what a
// subscriber in another process printed, and returns it: a core NATS
// subscriber misses what is published before it subscribed. After 30s it
// fails the test.
func publishUntil(t *testing.T, what string, pub func(), got <-chan string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		pub()
		select {
		case out := <-got:
			return out
		case <-time.After(250 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
	}
}

// waitProgress waits until done, failing only when progress (a count that
// grows while work is being done) stands still for stall, or after max: how
// fast a backlog drains depends on the machine, a stall does not.
func waitProgress(t testing.TB, what string, stall, max time.Duration, progress func() int, done func() bool) {
	t.Helper()
	start, last, lastChange := time.Now(), progress(), time.Now()
	for !done() {
		if p := progress(); p != last {
			last, lastChange = p, time.Now()
		}
		if time.Since(lastChange) > stall {
			t.Fatalf("waiting for %s: no progress for %v (at %d after %v)", what, stall, last, time.Since(start).Round(time.Second))
		}
		if time.Since(start) > max {
			t.Fatalf("waiting for %s: not done after %v (at %d)", what, max, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
