package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"edgeq/wal"
)

// testLogger discards logs unless EDGEQ_TEST_LOG is set (goroutines may log
// after a test ends, so t.Log cannot be the sink).
func testLogger() *slog.Logger {
	if os.Getenv("EDGEQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a bridge on broker with a topic template and short backoffs.
func testConfig(name, broker string) Config {
	c := DefaultConfig()
	c.Name = name
	c.Broker = broker
	c.Device.Topic = "sensors/{device}/telemetry"
	c.ReconnectMin = 50 * time.Millisecond
	c.ReconnectMax = 500 * time.Millisecond
	c.ConnectTimeout = 2 * time.Second
	c.KeepAlive = 5 * time.Second
	return c
}

func openLog(t testing.TB, dir string) *wal.Log {
	t.Helper()
	l, err := wal.Open(dir, wal.DefaultOptions(), testLogger())
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	return l
}

// msgKey identifies one published message: a device and its counter.
type msgKey struct {
	device string
	n      int
}

type testPayload struct {
	Device string `json:"device"`
	N      int    `json:"n"`
	Pad    string `json:"pad"`
}

// makePayload is a JSON payload of about size bytes carrying device and n.
func makePayload(device string, n, size int) []byte {
	b, _ := json.Marshal(testPayload{Device: device, N: n})
	if pad := size - len(b); pad > 0 {
		b, _ = json.Marshal(testPayload{Device: device, N: n, Pad: strings.Repeat("x", pad)})
	}
	return b
}

func parsePayload(b []byte) (msgKey, error) {
	var p testPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return msgKey{}, err
	}
	return msgKey{p.Device, p.N}, nil
}

func deviceName(d int) string { return fmt.Sprintf("dev-%03d", d) }

// makeMessages returns perDevice messages for each of devices devices,
// interleaved (every device's n, then n+1), with sensors/<device>/telemetry
// topics and 150-byte payloads.
func makeMessages(devices, perDevice int) []pubMsg {
	msgs := make([]pubMsg, 0, devices*perDevice)
	for n := 0; n < perDevice; n++ {
		for d := 0; d < devices; d++ {
			dev := deviceName(d)
			msgs = append(msgs, pubMsg{topic: "sensors/" + dev + "/telemetry", payload: makePayload(dev, n, 150)})
		}
	}
	return msgs
}

// logContent is what a log holds, decoded from the test payloads.
type logContent struct {
	records  int
	count    map[msgKey]int      // copies of each message
	perDev   map[string][]int    // counters in log order, per device
	seqs     map[string][]uint64 // wal sequence numbers in log order, per device
	sources  map[string]int
	topicHdr map[string]int // value of the Mqtt-Topic header → records
}

// readLog reads every partition of l from its first offset.
func readLog(t testing.TB, l *wal.Log) logContent {
	t.Helper()
	// QoS 0 records wait for nobody: make them durable (readable) first.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	c := logContent{
		count: make(map[msgKey]int), perDev: make(map[string][]int), seqs: make(map[string][]uint64),
		sources: make(map[string]int), topicHdr: make(map[string]int),
	}
	for p := 0; p < l.NumPartitions(); p++ {
		for from := uint64(1); ; {
			b, err := l.Read(p, from, 1024, 1<<20)
			if err != nil {
				t.Fatalf("read partition %d at %d: %v", p, from, err)
			}
			if b.Corrupt > 0 || b.Lost > 0 {
				t.Fatalf("partition %d: %d corrupt, %d lost", p, b.Corrupt, b.Lost)
			}
			if len(b.Entries) == 0 {
				break
			}
			for _, e := range b.Entries {
				r := e.Record
				if r.Kind != wal.KindData {
					continue
				}
				k, err := parsePayload(r.Payload)
				if err != nil {
					t.Fatalf("partition %d offset %d: payload %q: %v", p, e.Offset, r.Payload, err)
				}
				if k.device != r.Device {
					t.Fatalf("record device %q, payload device %q", r.Device, k.device)
				}
				c.records++
				c.count[k]++
				c.perDev[k.device] = append(c.perDev[k.device], k.n)
				c.seqs[r.Device] = append(c.seqs[r.Device], r.Seq)
				c.sources[r.Source]++
				for _, h := range r.Headers {
					if h.Key == DefaultTopicHeader {
						c.topicHdr[h.Value]++
					}
				}
			}
			from = b.Next
		}
	}
	return c
}

// missing returns the keys of msgs[idx...] that the log does not hold.
func (c logContent) missing(msgs []pubMsg, idx []int) []msgKey {
	var out []msgKey
	for _, i := range idx {
		k, _ := parsePayload(msgs[i].payload)
		if c.count[k] == 0 {
			out = append(out, k)
		}
	}
	return out
}

// duplicates counts the extra copies in the log.
func (c logContent) duplicates() int {
	n := 0
	for _, v := range c.count {
		n += v - 1
	}
	return n
}

// reorders counts, per device, the records whose counter is below one seen
// before it (duplicates excluded).
func (c logContent) reorders() int {
	n := 0
	for _, ns := range c.perDev {
		seen := make(map[int]bool)
		maxN := -1
		for _, v := range ns {
			if seen[v] {
				continue
			}
			seen[v] = true
			if v < maxN {
				n++
			}
			maxN = max(maxN, v)
		}
	}
	return n
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// waitFor polls cond every 10ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
