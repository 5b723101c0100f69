package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
)

// BenchmarkNSQVsNsqd runs the same go-nsq producers and consumers against
// edgeq's NSQ front end (durable, per-device order) and nsqd 1.3 built from
// the module proxy (no order across its in-flight window), side by side:
// 200,000 messages of 150 bytes from 1,000 devices, published with
// MultiPublish by 4 producers, then consumed by 4 consumers (MaxInFlight 32).
// It reports publish and consume rates and, per target, how many messages
// came before an earlier one of their device.
//
//	go test -run '^$' -bench NSQVsNsqd -benchtime 1x ./e2e
func BenchmarkNSQVsNsqd(b *testing.B) {
	const msgs, devices, consumers, inFlight = 200_000, 1_000, 4, 32
	for _, target := range []string{"edgeq", "nsqd"} {
		b.Run(target, func(b *testing.B) {
			for range b.N {
				addr := startTarget(b, target)
				pub := nsqPublishAll(b, addr, msgs, devices)
				took, inversions := nsqConsumeAll(b, addr, msgs, consumers, inFlight)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(msgs)/pub.Seconds(), "pub-msgs/s")
				b.ReportMetric(float64(msgs)/took.Seconds(), "consume-msgs/s")
				b.ReportMetric(float64(inversions), "order-inversions")
				b.Logf("%s: publish %v (%.0f msgs/s), consume %v (%.0f msgs/s), %d messages before an earlier one of their device",
					target, pub.Round(time.Millisecond), float64(msgs)/pub.Seconds(), took.Round(time.Millisecond), float64(msgs)/took.Seconds(), inversions)
			}
		})
	}
}

// startTarget starts edgeq (NSQ on, channel "bench" declared) or nsqd
// (channel "bench" created before publishing, so it gets every message),
// and returns its TCP address.
func startTarget(b *testing.B, target string) string {
	b.Helper()
	if target == "edgeq" {
		n, addr := newNSQNode(b, "groups:\n  - subject: telemetry.>\n    queue: bench\n")
		n.start()
		return addr
	}
	bin := nsqTool(b, "nsqd")
	tcp, httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(b)), fmt.Sprintf("127.0.0.1:%d", freePort(b))
	data := b.TempDir()
	cmd := exec.Command(bin, "--tcp-address", tcp, "--http-address", httpAddr, "--data-path", data, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(data) })
	waitFor(b, "nsqd", 30*time.Second, func() bool {
		for _, path := range []string{"/topic/create?topic=telemetry", "/channel/create?topic=telemetry&channel=bench"} {
			resp, err := http.Post("http://"+httpAddr+path, "", nil)
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return false
			}
		}
		return true
	})
	return tcp
}

func nsqPublishAll(b *testing.B, addr string, msgs, devices int) time.Duration {
	b.Helper()
	const producers, batch = 4, 100
	pad := strings.Repeat("x", 150-len(`{"device":"d0000","n":000000,"p":""}`))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for w := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := nsq.NewProducer(addr, nsq.NewConfig())
			if err != nil {
				errs <- err
				return
			}
			p.SetLogger(nil, nsq.LogLevelError)
			defer p.Stop()
			// Producer w publishes devices w, w+4, ...: each device's
			// messages from one producer, in order.
			var buf [][]byte
			for i := 0; i < msgs/devices; i++ {
				for d := w; d < devices; d += producers {
					buf = append(buf, fmt.Appendf(nil, `{"device":"d%04d","n":%06d,"p":"%s"}`, d, i+1, pad))
					if len(buf) == batch {
						if err := p.MultiPublish("telemetry", buf); err != nil {
							errs <- err
							return
						}
						buf = buf[:0]
					}
				}
			}
			if len(buf) > 0 {
				if err := p.MultiPublish("telemetry", buf); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

func nsqConsumeAll(b *testing.B, addr string, msgs, consumers, inFlight int) (time.Duration, int) {
	b.Helper()
	var (
		mu         sync.Mutex
		last       = map[string]int{}
		inversions int
		got        atomic.Int64
	)
	done := make(chan struct{})
	start := time.Now()
	for range consumers {
		cfg := nsq.NewConfig()
		cfg.MaxInFlight = inFlight
		c, err := nsq.NewConsumer("telemetry", "bench", cfg)
		if err != nil {
			b.Fatal(err)
		}
		c.SetLogger(nil, nsq.LogLevelError)
		c.AddConcurrentHandlers(nsq.HandlerFunc(func(m *nsq.Message) error {
			var v telem
			_ = json.Unmarshal(m.Body, &v)
			mu.Lock()
			if v.N < last[v.Device] {
				inversions++
			}
			last[v.Device] = max(last[v.Device], v.N)
			mu.Unlock()
			if got.Add(1) == int64(msgs) {
				close(done)
			}
			return nil
		}), 4)
		if err := c.ConnectToNSQD(addr); err != nil {
			b.Fatal(err)
		}
		defer c.Stop()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("consumed %d of %d", got.Load(), msgs)
	}
	return time.Since(start), inversions
}
