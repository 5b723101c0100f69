package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
)

// browser is a headless Debian chromium driven over the DevTools protocol,
// with the flags of a closed network and an empty profile. It records what
// the page writes to its console: errors and uncaught exceptions, and entries
// of the browser log (failed requests).
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	bin := requireTool(t, "chromium", "/usr/bin/chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.msgs = append(b.msgs, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// problems lists the console errors and exceptions so far.
func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.msgs {
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
			out = append(out, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text))
		}
	}
	return out
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func evalIn[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until expr is true in the page.
func (b *browser) waitJS(what string, timeout time.Duration, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for !evalIn[bool](b, expr) {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %v waiting for %s (%s); console: %v", timeout, what, expr, b.problems())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// screenshot writes a PNG of the whole page to $EDGEQ_E2E_ARTIFACTS (or the
// test's temporary directory) and returns its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("EDGEQ_E2E_ARTIFACTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

// statusJSON reads /v1/status.
func statusJSON(t *testing.T, n *node, token string) map[string]any {
	t.Helper()
	code, body := getWithToken(t, n.httpURL()+"/v1/status", token)
	var st map[string]any
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
		t.Fatalf("/v1/status: %d %v: %s", code, err, body)
	}
	return st
}

func groupLag(st map[string]any, queue string) (uint64, bool) {
	gs, _ := st["groups"].([]any)
	for _, g := range gs {
		g := g.(map[string]any)
		if g["queue"] == queue {
			return uint64(g["lag"].(float64)), true
		}
	}
	return 0, false
}

// TestConsoleUnderLoad opens the console in headless Chromium on a node
// that NATS publishers, an MQTT bridge and a worker keep busy: no console
// errors, the throughput plot moves, a group's lag is /v1/status's, a
// device search finds the device, and a stopped broker shows its bridge
// as down.
func TestConsoleUnderLoad(t *testing.T) {
	requireTool(t, "mosquitto_pub")
	mport, mosq := startMosquittoCmd(t)
	n := newNode(t, plantBridge(mport)+`groups:
  - {subject: telemetry.>, queue: archive, deliver: all}
hot:
  min_rate: 40
  factor: 2
`)
	n.start()
	b := newBrowser(t, 1280, 1000)
	tr := newTracker(t)
	startWorker(t, n.url(), "worker-1", tr, func() {})

	// Publishers: 24 devices at ~10 msgs/s each and one loud device at
	// ~150 msgs/s (hot isolation moves it), until stopped.
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	var published atomic.Uint64
	for p := 0; p < 3; p++ {
		nc, err := nats.Connect(n.url(), nats.Name(fmt.Sprintf("pub-%d", p)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					nc.Flush()
					return
				case <-tick.C:
				}
				for d := p * 8; d < p*8+8; d++ {
					if i%5 == d%5 {
						nc.Publish(fmt.Sprintf("telemetry.sensor-%02d", d), fmt.Appendf(nil, `{"temp":%d.%d,"n":%d}`, 20+d%7, i%10, i))
						published.Add(1)
					}
				}
				if p == 0 {
					for k := 0; k < 3; k++ {
						nc.Publish("telemetry.press-7", fmt.Appendf(nil, `{"bar":%d}`, i))
						published.Add(1)
					}
				}
			}
		}()
	}
	// MQTT telemetry through the bridge.
	waitFor(t, "bridge subscribed", 20*time.Second, func() bool {
		st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		return strings.Contains(st, `"subscribed": true`)
	})
	mqttPub := exec.Command("mosquitto_pub", "-h", "127.0.0.1", "-p", strconv.Itoa(mport), "-q", "1", "-t", "sensors/line-3/data", "-l")
	var lines strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&lines, "{\"rpm\":%d}\n", 1000+i)
	}
	mqttPub.Stdin = strings.NewReader(lines.String())
	if out, err := mqttPub.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}

	b.do(chromedp.Navigate(n.httpURL() + "/"))
	b.waitJS("the stream", 20*time.Second, `document.getElementById('live-text').textContent === 'live'`)
	// The plot moves: points accumulate, the ingest rate is above zero and
	// the drawn line changes between snapshots.
	b.waitJS("plot points", 30*time.Second, `+document.getElementById('plot-rates').dataset.points >= 4 && +document.getElementById('plot-rates').dataset.in > 0`)
	d1 := evalIn[string](b, `document.getElementById('line-in').getAttribute('d')`)
	b.waitJS("the plot to move", 20*time.Second, fmt.Sprintf(`document.getElementById('line-in').getAttribute('d') !== %q`, d1))
	b.waitJS("the mqtt bridge up", 20*time.Second, `document.querySelector('tr[data-bridge="mqtt/plant"]')?.dataset.state === 'up'`)
	b.waitJS("an isolated device", 40*time.Second, `[...document.querySelectorAll('#devices td')].some(td => td.textContent === 'isolated')`)
	// Let the plots fill, then keep a picture of the main view
	// ($EDGEQ_E2E_CONSOLE_FILL: longer, for docs/console.png).
	fill := 8 * time.Second
	if d, err := time.ParseDuration(os.Getenv("EDGEQ_E2E_CONSOLE_FILL")); err == nil {
		fill = d
	}
	time.Sleep(fill)
	b.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot("console.png")

	stopLoad()
	wg.Wait()
	// The group's lag as the page shows it is /v1/status's: "archive" has
	// no members, so its lag settles at everything stored.
	var lag uint64
	waitFor(t, "archive lag settled", 30*time.Second, func() bool {
		a, _ := groupLag(statusJSON(t, n, ""), "archive")
		time.Sleep(1500 * time.Millisecond)
		c, ok := groupLag(statusJSON(t, n, ""), "archive")
		lag = c
		return ok && a == c && c > 0
	})
	if lag < published.Load() {
		t.Fatalf("archive lag %d below the %d messages published over NATS", lag, published.Load())
	}
	b.waitJS("the page's lag", 20*time.Second, fmt.Sprintf(`document.querySelector('tr[data-group="telemetry.> archive"] td.lag')?.dataset.value === '%d'`, lag))

	// The device search finds a device: partition and last seq as the node
	// answers a publish of it.
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request("telemetry.sensor-05", []byte(`{"temp":99.5,"probe":true}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack pubAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		t.Fatalf("pub-ack %s: %v", reply.Data, err)
	}
	b.do(chromedp.SendKeys(chromedp.ID("device-id"), "sensor-05"), chromedp.Click(chromedp.CSS("#lookup button")))
	b.waitJS("the device view", 20*time.Second, fmt.Sprintf(`document.querySelector('#device-view [data-field=last_seq]')?.textContent === %q`, fmtThousands(ack.Seq)))
	part := evalIn[string](b, `document.querySelector('#device-view [data-field=partition]').textContent`)
	if !strings.HasPrefix(part, strconv.Itoa(ack.Partition)) {
		t.Fatalf("device view partition %q, the pub-ack says %d", part, ack.Partition)
	}
	if !evalIn[bool](b, `document.getElementById('device-view').textContent.includes('"probe":true')`) {
		t.Fatalf("the last payload is not shown: %s", evalIn[string](b, `document.getElementById('device-view').textContent`))
	}
	// A bad device ID is refused by the page and by the endpoint.
	resp, err := http.Get(n.httpURL() + "/v1/devices/bad%20id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/v1/devices/bad id: %d", resp.StatusCode)
	}

	// Stop the broker: the bridge shows as down, in red.
	mosq.Process.Signal(syscall.SIGTERM)
	b.waitJS("the bridge down", 30*time.Second, `document.querySelector('tr[data-bridge="mqtt/plant"]')?.dataset.state === 'down' && !!document.querySelector('tr[data-bridge="mqtt/plant"] .chip.bad')`)
	b.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot("console-bridge-down.png")

	// A phone-sized screen: nothing but the tables' own scroll boxes is
	// wider than the screen.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	time.Sleep(1500 * time.Millisecond)
	if w := evalIn[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Fatalf("on a phone the page is %dpx wide, the screen 390px", w)
	}
	b.screenshot("console-phone.png")

	if p := b.problems(); len(p) > 0 {
		t.Fatalf("console errors: %v", p)
	}
}

// TestConsoleDevicesSending: five devices publish at a trickle to a node
// whose worker keeps up. The console's first figure counts the five, and
// falls to 0 once they stop. (It used to show the largest group's
// active_devices, the devices with unfinished messages in a group, which is
// 0 whenever the workers keep up: "Active devices 0" while five devices
// published.)
func TestConsoleDevicesSending(t *testing.T) {
	n := newNode(t, "hot:\n  window: 1s\n")
	n.start()
	tr := newTracker(t)
	startWorker(t, n.url(), "worker-1", tr, func() {})
	nc, err := nats.Connect(n.url(), nats.Name("five-devices"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				nc.Flush()
				return
			case <-tick.C:
			}
			for d := 1; d <= 5; d++ {
				nc.Publish(fmt.Sprintf("telemetry.meter-%d", d), fmt.Appendf(nil, `{"kwh":%d}`, i))
			}
		}
	}()

	b := newBrowser(t, 1280, 1000)
	b.do(chromedp.Navigate(n.httpURL() + "/"))
	b.waitJS("the stream", 20*time.Second, `document.getElementById('live-text').textContent === 'live'`)
	const figure = `document.querySelector('#fig-active .value').textContent`
	b.waitJS("five devices sending", 30*time.Second, figure+` === '5'`)
	if label := evalIn[string](b, `document.querySelector('#fig-active .label').textContent`); label != "Devices sending" {
		t.Fatalf("the first figure is labelled %q", label)
	}
	st := statusJSON(t, n, "")
	for _, g := range st["groups"].([]any) {
		g := g.(map[string]any)
		t.Logf("group %v: active_devices (devices with unfinished messages) %v while five devices send", g["queue"], g["active_devices"])
	}
	b.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot("console-devices-sending.png")

	stopLoad()
	wg.Wait()
	b.waitJS("no device sending once they stop", 30*time.Second, figure+` === '0'`)
	if p := b.problems(); len(p) > 0 {
		t.Fatalf("console errors: %v", p)
	}
}

// TestConsoleToken: with http.token set the page asks for the token, a
// wrong one is refused (401) and said so, the right one opens the stream;
// the token is kept in sessionStorage, never in the URL.
func TestConsoleToken(t *testing.T) {
	const token = "console-t0ken-42"
	n := newNode(t, "http:\n  token: "+token+"\n")
	n.start()
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {token, 200}} {
		if code := headWithToken(t, n.httpURL()+"/v1/events", tc.token); code != tc.want {
			t.Fatalf("/v1/events with token %q: %d, want %d", tc.token, code, tc.want)
		}
	}
	b := newBrowser(t, 1000, 800)
	b.do(chromedp.Navigate(n.httpURL() + "/"))
	b.waitJS("the token prompt", 20*time.Second, `document.getElementById('login').open`)
	b.do(chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitJS("the refusal", 20*time.Second, `!document.getElementById('login-error').hidden && document.getElementById('login-error').textContent.includes('401') && document.getElementById('login').open`)
	b.screenshot("console-token-refused.png")
	b.do(chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS("#login-form button")))
	b.waitJS("the stream", 20*time.Second, `document.getElementById('live-text').textContent === 'live' && !document.getElementById('login').open`)
	b.waitJS("the node's name", 20*time.Second, `document.getElementById('node').textContent.includes('e2e-node')`)
	if got := evalIn[string](b, `sessionStorage.getItem('edgeq-token')`); got != token {
		t.Fatalf("sessionStorage token %q", got)
	}
	if u := evalIn[string](b, `location.href`); strings.Contains(u, token) {
		t.Fatalf("token in the URL: %s", u)
	}
	// A 401 shows in the browser log as a failed request; anything else is
	// a page error.
	for _, p := range b.problems() {
		if !strings.Contains(p, "401") {
			t.Fatalf("console error: %s", p)
		}
	}
}

// TestConsoleCluster: on a node of a three-node cluster the console shows
// the peers up, the group's leader as /v1/status names it, and a killed peer
// as down.
func TestConsoleCluster(t *testing.T) {
	nodes := clusterOf(t, "")
	a, b := nodes[0], nodes[1]
	var leader string
	waitFor(t, "a leader", 30*time.Second, func() bool {
		leader = leaderOf("telemetry.> workers", nodes...)
		return leader != ""
	})
	br := newBrowser(t, 1280, 1000)
	br.do(chromedp.Navigate(a.httpURL() + "/"))
	br.waitJS("the cluster panel", 20*time.Second, `!document.getElementById('cluster-panel').hidden`)
	br.waitJS("both peers up", 20*time.Second, `['gw-b', 'gw-c'].every(p => document.querySelector('tr[data-peer="' + p + '"] .chip')?.textContent.startsWith('up'))`)
	br.waitJS("the leader", 20*time.Second, fmt.Sprintf(`document.querySelector('tr[data-leader="telemetry.> workers"]')?.dataset.node === %q`, leader))
	b.kill()
	br.waitJS("gw-b down", 30*time.Second, `document.querySelector('tr[data-peer="gw-b"] .chip.bad')?.textContent === 'down'`)
	br.do(chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	br.screenshot("console-cluster.png")
	if p := br.problems(); len(p) > 0 {
		t.Fatalf("console errors: %v", p)
	}
}

// getWithToken GETs url, with a bearer token when given: status and body.
func getWithToken(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	resp := requestWithToken(t, url, token)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// headWithToken GETs url and returns the status without reading the body
// (an event stream never ends).
func headWithToken(t *testing.T, url, token string) int {
	t.Helper()
	resp := requestWithToken(t, url, token)
	resp.Body.Close()
	return resp.StatusCode
}

func requestWithToken(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// fmtThousands writes n as the page does (en-US grouping).
func fmtThousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
