package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// countingUpstream is an HTTP upstream that stores every record it gets
// (jsonl), counting each record's receptions.
type countingUpstream struct {
	mu   sync.Mutex
	seen map[string]int // payload -> times received
}

func newCountingUpstream(t *testing.T) (*countingUpstream, string) {
	u := &countingUpstream{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := bufio.NewScanner(r.Body)
		var lines []string
		for sc.Scan() {
			var rec struct {
				Payload json.RawMessage `json:"payload"`
				B64     []byte          `json:"payload_base64"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				w.WriteHeader(400)
				return
			}
			lines = append(lines, string(rec.Payload)+string(rec.B64))
		}
		u.mu.Lock()
		for _, l := range lines {
			u.seen[l]++
		}
		u.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return u, srv.URL + "/in"
}

// counts returns the distinct records received and the duplicates.
func (u *countingUpstream) counts() (distinct, dupes int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range u.seen {
		distinct++
		dupes += n - 1
	}
	return distinct, dupes
}

// TestSIGHUPReloadsBridgesAndToken: SIGHUP swaps http.token and restarts
// only the uplinks that changed (one moved to another upstream, one
// added); the unchanged one runs on and gets every record exactly once, and
// the moved one's new upstream gets only what came after. A change that
// needs a restart is refused by name and the configuration in use stays.
func TestSIGHUPReloadsBridgesAndToken(t *testing.T) {
	keep, keepURL := newCountingUpstream(t)
	old, oldURL := newCountingUpstream(t)
	moved, movedURL := newCountingUpstream(t)
	extra, extraURL := newCountingUpstream(t)
	up := func(name, url string) string {
		return fmt.Sprintf("- {name: %s, type: http, retry_min: 50ms, retry_max: 200ms, http: {url: '%s', batch: 10}}\n", name, url)
	}
	conf := func(token string, uplinks ...string) string {
		return "http:\n  token: " + token + "\nuplinks:\n" + strings.Join(uplinks, "")
	}
	n := newNode(t, conf("first-token-of-16+", up("keep", keepURL), up("move", oldURL)))
	n.start()
	pub := newPublisher(t, n.url(), 64)
	for i := 0; i < 100; i++ {
		pub.publish(fmt.Sprintf("dev-%d", i%10), fmt.Sprintf("a%d", i))
	}
	waitFor(t, "the first 100 upstream", 60*time.Second, func() bool {
		k, _ := keep.counts()
		o, _ := old.counts()
		return k == 100 && o == 100
	})
	status := func(token string) int {
		req, _ := http.NewRequest("GET", n.httpURL()+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := n.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := status("first-token-of-16+"); code != 200 {
		t.Fatalf("status with the first token: %d", code)
	}

	if err := os.WriteFile(n.config, []byte(conf("second-token-of-16+", up("keep", keepURL), up("move", movedURL), up("extra", extraURL))), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 30*time.Second, func() bool { return strings.Contains(n.logs(), "configuration reloaded") })
	if logs := n.logs(); !strings.Contains(logs, "uplinks[move]") || !strings.Contains(logs, "uplinks[extra]") || strings.Contains(logs, "uplinks[keep]") {
		t.Fatalf("the reload should restart move and extra only:\n%s", logs)
	}
	if a, b := status("first-token-of-16+"), status("second-token-of-16+"); a != 401 || b != 200 {
		t.Fatalf("after the reload: old token %d, new token %d; want 401, 200", a, b)
	}
	for i := 0; i < 100; i++ {
		pub.publish(fmt.Sprintf("dev-%d", i%10), fmt.Sprintf("b%d", i))
	}
	waitFor(t, "the next 100 upstream", 60*time.Second, func() bool {
		k, _ := keep.counts()
		m, _ := moved.counts()
		x, _ := extra.counts()
		return k == 200 && m == 100 && x == 200
	})
	if _, d := keep.counts(); d != 0 {
		t.Fatalf("the unchanged uplink sent %d records twice", d)
	}
	if o, _ := old.counts(); o != 100 {
		t.Fatalf("the moved uplink's old upstream got %d records, want the first 100", o)
	}
	moved.mu.Lock()
	for p := range moved.seen {
		if strings.HasPrefix(p, "a") {
			t.Errorf("the moved uplink sent %s again: it was acked by the old upstream", p)
		}
	}
	moved.mu.Unlock()

	// wal.partitions cannot change while running: refused, all kept.
	if err := os.WriteFile(n.config, []byte("wal:\n  partitions: 4\n"+conf("third-token-of-16+", up("keep", keepURL))), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload refused", 30*time.Second, func() bool { return strings.Contains(n.logs(), "reload refused") })
	if logs := n.logs(); !strings.Contains(logs, "wal.partitions") {
		t.Fatalf("the refusal does not name wal.partitions:\n%s", logs)
	}
	if code := status("second-token-of-16+"); code != 200 {
		t.Fatalf("after a refused reload the token in use stopped working: %d", code)
	}
}

// TestSIGHUPReloadsMQTTBridge: while sensors publish QoS 1, SIGHUP changes
// one MQTT bridge (it restarts, on its persistent session) and keeps the
// other (it stays connected); every message of both arrives.
func TestSIGHUPReloadsMQTTBridge(t *testing.T) {
	requireTool(t, "mosquitto_pub")
	port := startMosquitto(t)
	bridges := func(yardHeader string) string {
		return fmt.Sprintf(`mqtt:
  - {name: plant, broker: "tcp://127.0.0.1:%d", topics: ["plant/+/data"], qos: 1, device: {topic: "plant/{device}/data"}}
  - {name: yard, broker: "tcp://127.0.0.1:%d", topics: ["yard/+/data"], qos: 1, device: {topic: "yard/{device}/data"}, headers: {Site: %s}}
`, port, port, yardHeader)
	}
	n := newNode(t, bridges("one"))
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "w", tr, func() {})
	waitFor(t, "both bridges subscribed", 30*time.Second, func() bool { return strings.Count(n.logs(), "connected and subscribed") >= 2 })
	const per = 300
	publish := func(prefix string, done chan<- error) {
		var lines strings.Builder
		for i := 1; i <= per; i++ {
			fmt.Fprintf(&lines, "%s|%d\n", prefix, i)
		}
		cmd := exec.Command("mosquitto_pub", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "-q", "1", "-t", prefix+"/s1/data", "-l")
		cmd.Stdin = strings.NewReader(lines.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("mosquitto_pub: %v %s", err, out)
		}
		done <- err
	}
	done := make(chan error, 2)
	go publish("plant", done)
	go publish("yard", done)
	if err := os.WriteFile(n.config, []byte(bridges("two")), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "reload logged", 30*time.Second, func() bool { return strings.Contains(n.logs(), "configuration reloaded") })
	waitFor(t, "every message of both bridges", 60*time.Second, func() bool { return tr.distinct() == 2*per })
	logs := n.logs()
	if !strings.Contains(logs, "mqtt[yard]") || strings.Contains(logs, "mqtt[plant]") {
		t.Fatalf("the reload should restart yard only:\n%s", logs)
	}
	if c := strings.Count(logs, `msg="connected and subscribed" node=e2e-node component=mqtt bridge=plant`); c != 1 {
		t.Fatalf("the unchanged bridge connected %d times, want once:\n%s", c, logs)
	}
}
