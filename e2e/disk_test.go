package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"edgeq/internal/powerfs"

	"github.com/nats-io/nats.go"
)

// Disk trouble on a gateway, with the real binary on a powerfs mount: a
// card that returns EIO, turns read-only or is full, and the free-space
// watermark.

const diskGroup = "groups:\n  - {subject: telemetry.>, queue: workers, deliver: all}\n"

// readyz returns /readyz's status code and body.
func readyz(n *node) (int, string) {
	resp, err := n.httpClient().Get(n.httpURL() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// request publishes one message with a pub-ack; it returns the ack or the
// node's error text.
func request(t testing.TB, nc *nats.Conn, device, payload string) (pubAck, error) {
	t.Helper()
	m, err := nc.Request("telemetry."+device, []byte(payload), 5*time.Second)
	if err != nil {
		return pubAck{}, err
	}
	var a pubAck
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return a, fmt.Errorf("bad pub-ack %q: %w", m.Data, err)
	}
	if a.Error != "" {
		return a, fmt.Errorf("%s", a.Error)
	}
	return a, nil
}

// drainAll joins the queue group and waits until every payload in want was
// delivered.
func drainAll(t testing.TB, n *node, want map[string]bool) {
	t.Helper()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	seen := map[string]bool{}
	if _, err := nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
		mu.Lock()
		seen[string(m.Data)] = true
		mu.Unlock()
		m.Ack()
	}); err != nil {
		t.Fatal(err)
	}
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for p := range want {
			if !seen[p] {
				out = append(out, p)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Fatalf("%d of %d pub-acked messages never delivered, e.g. %v", len(m), len(want), m[:min(5, len(m))])
	}
}

func TestDiskFaults(t *testing.T) {
	cases := []struct {
		fault powerfs.Fault
		text  string // in the publisher's error and in /readyz
	}{
		{powerfs.FaultEIO, "input/output error"},
		{powerfs.FaultEROFS, "read-only file system"},
		{powerfs.FaultENOSPC, "no space left on device"},
	}
	for _, c := range cases {
		t.Run(c.fault.String(), func(t *testing.T) {
			fsys := mountPowerFS(t, powerfs.Options{})
			n := newNode(t, diskGroup+"wal:\n  min_free_bytes: 0\n")
			n.dataDir = filepath.Join(fsys.Path(), "data")
			n.start()
			nc, err := nats.Connect(n.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			acked := map[string]bool{}
			pub := func(i int) error {
				payload := fmt.Sprintf("m-%d", i)
				_, err := request(t, nc, fmt.Sprintf("dev-%d", i%7), payload)
				if err == nil {
					acked[payload] = true
				}
				return err
			}
			for i := range 200 {
				if err := pub(i); err != nil {
					t.Fatalf("publish before the fault: %v", err)
				}
			}
			fsys.SetFault(c.fault)
			var pubErr error
			for i := 200; i < 220; i++ {
				if err := pub(i); err != nil {
					pubErr = err
				} else {
					t.Errorf("message %d acknowledged while the disk fails with %v", i, c.fault)
				}
			}
			if pubErr == nil || !strings.Contains(pubErr.Error(), c.text) {
				t.Fatalf("publisher error under %v: %v, want one saying %q", c.fault, pubErr, c.text)
			}
			t.Logf("publisher error under %v: %v", c.fault, pubErr)
			var body string
			waitFor(t, "/readyz to say why", 15*time.Second, func() bool {
				code, b := readyz(n)
				body = b
				return code == 503 && strings.Contains(b, c.text)
			})
			t.Logf("/readyz under %v: %s", c.fault, strings.TrimSpace(body))
			if !n.running() {
				t.Fatalf("the node exited under %v: %s", c.fault, n.logs())
			}
			fsys.SetFault(powerfs.FaultNone)
			waitFor(t, "/readyz 200 once the disk is back", 15*time.Second, func() bool {
				code, _ := readyz(n)
				return code == 200
			})
			failed := 0
			for i := 300; i < 500; i++ {
				if err := pub(i); err != nil {
					failed++
					if failed > 2 {
						t.Fatalf("publish after the disk came back: %v", err)
					}
				}
			}
			// Nothing durable was damaged: a power cut and a restart later,
			// every acknowledged message is delivered.
			n.kill()
			if err := fsys.Cut(); err != nil {
				t.Fatal(err)
			}
			n.start()
			drainAll(t, n, acked)
		})
	}
}

// metricLines scrapes /metrics.
func metricLines(t testing.TB, n *node) []string {
	t.Helper()
	resp, err := n.httpClient().Get(n.httpURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Split(string(b), "\n")
}

// metricValue reads one series from /metrics.
func metricValue(t testing.TB, n *node, series string) float64 {
	t.Helper()
	for _, line := range metricLines(t, n) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// TestDiskWatermark: on a small disk the node refuses publishes (reject) or
// drops the oldest (drop_oldest) before the file system is full; never ENOSPC.
func TestDiskWatermark(t *testing.T) {
	for _, policy := range []string{"reject", "drop_oldest"} {
		t.Run(policy, func(t *testing.T) {
			fsys := mountPowerFS(t, powerfs.Options{Capacity: 6 << 20})
			n := newNode(t, diskGroup+fmt.Sprintf("wal:\n  segment_size: 64KiB\n  min_free_bytes: 3MiB\n  full_policy: %s\n  partitions: 2\n  hot_partitions: 1\n", policy))
			n.dataDir = filepath.Join(fsys.Path(), "data")
			n.start()
			nc, err := nats.Connect(n.url())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			payload := strings.Repeat("x", 4000)
			acked := map[string]bool{}
			var (
				mu      sync.Mutex
				lowErr  error
				refused int
				wg      sync.WaitGroup
			)
			// About 3 MiB of room above the watermark: 3,200 messages of 4 KB
			// (13 MB) cross it by far. Eight publishers at once. Under
			// drop_oldest a refused publish is sent again after a back-off,
			// as a publisher should, until it is stored: every message must
			// get in (how many are refused on the way depends on how fast
			// retention frees space against the publishers, i.e. on the
			// machine's load; that they all get in does not).
			retryUntil := time.Now().Add(3 * time.Minute) // bounds a node that never makes room
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < 3200; i += 8 {
						mu.Lock()
						stop := lowErr != nil
						mu.Unlock()
						if stop {
							return
						}
						p := fmt.Sprintf("%d|%s", i, payload)
						for {
							_, err := request(t, nc, fmt.Sprintf("dev-%d", i%5), p)
							mu.Lock()
							again := false
							switch {
							case err == nil:
								acked[p] = true
							case strings.Contains(err.Error(), "no space"):
								t.Errorf("ENOSPC reached the publisher: the watermark did not hold: %v", err)
								lowErr = err
							case strings.Contains(err.Error(), "below the watermark"):
								refused++
								switch {
								case policy == "reject":
									lowErr = err
								case time.Now().After(retryUntil):
									t.Errorf("drop_oldest: message %d still refused after 3 minutes: retention never made room", i)
									lowErr = err
								default:
									again = true
								}
							default:
								t.Errorf("publish %d: %v", i, err)
								lowErr = err
							}
							mu.Unlock()
							if !again {
								break
							}
							time.Sleep(50 * time.Millisecond) // back off, as a publisher should
						}
						if i%400 < 8 && policy == "drop_oldest" {
							time.Sleep(1100 * time.Millisecond) // let the watermark check run
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			if policy == "drop_oldest" {
				// Publishes are refused only while retention frees space.
				// It took in every message, more than the disk holds: the
				// oldest made room.
				if len(acked) != 3200 || len(acked)*len(payload) < 6<<20 {
					t.Fatalf("drop_oldest acked only %d messages (%d refused) on a 6 MiB disk", len(acked), refused)
				}
				waitFor(t, "/readyz 200 once the oldest were dropped", 20*time.Second, func() bool {
					code, _ := readyz(n)
					return code == 200
				})
				if _, err := request(t, nc, "dev-0", "after"); err != nil {
					t.Fatalf("publish after dropping: %v", err)
				}
				var dropped float64
				for p := range 3 {
					dropped += max(metricValue(t, n, fmt.Sprintf(`edgeq_log_retention_dropped_records_total{partition="%d"}`, p)), 0)
				}
				if dropped <= 0 {
					t.Fatal("drop_oldest below the watermark dropped nothing")
				}
				t.Logf("drop_oldest: %d acked, %v records dropped below the watermark, %d publishes refused while dropping", len(acked), dropped, refused)
				return
			}
			if lowErr == nil {
				t.Fatal("10 MB into a 6 MB disk and no watermark refusal")
			}
			t.Logf("publisher error below the watermark (after %d acked): %v", len(acked), lowErr)
			code, body := readyz(n)
			if code != 503 || !strings.Contains(body, "watermark") {
				t.Fatalf("/readyz below the watermark: %d %q", code, body)
			}
			if v := metricValue(t, n, "edgeq_log_disk_low"); v != 1 {
				t.Fatalf("edgeq_log_disk_low = %v", v)
			}
			if v := metricValue(t, n, `edgeq_ingest_rejected_total{stage="log",reason="disk_low"}`); v < 1 {
				t.Fatalf("disk_low rejections = %v", v)
			}
			// Workers catch up, retention frees committed segments, ingest resumes.
			drainAll(t, n, acked)
			waitFor(t, "/readyz 200 after the workers caught up", 20*time.Second, func() bool {
				code, _ := readyz(n)
				return code == 200
			})
			if _, err := request(t, nc, "dev-0", "after"); err != nil {
				t.Fatalf("publish after space returned: %v", err)
			}
		})
	}
}
