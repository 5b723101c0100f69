package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenInNetns listens on addr inside namespace ns: the socket is created
// there (see dialInNetns) and stays there.
func listenInNetns(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join("/var/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, r.err)
	}
	return r.ln
}

// upArrivals is what an upstream received, in order: payloads
// "<node>|<device>|<round>".
type upArrivals struct {
	mu   sync.Mutex
	list []string
}

func (a *upArrivals) add(p string) {
	a.mu.Lock()
	a.list = append(a.list, p)
	a.mu.Unlock()
}

func (a *upArrivals) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.list...)
}

func (a *upArrivals) distinct() int {
	seen := map[string]bool{}
	for _, p := range a.snapshot() {
		seen[p] = true
	}
	return len(seen)
}

// check: every acked payload arrived; per storing node and device, first
// upArrivals in publish order. It returns the duplicates (at least once).
func (a *upArrivals) check(t *testing.T, kind string, acked map[string]pubAck) (dupes int) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]int{}
	for _, p := range a.snapshot() {
		seen[p]++
		if seen[p] > 1 {
			dupes++
			continue
		}
		f := strings.Split(p, "|")
		if len(f) != 3 {
			t.Fatalf("%s: unexpected payload %q", kind, p)
		}
		r, _ := strconv.Atoi(f[2])
		key := f[0] + "/" + f[1]
		if r <= last[key] {
			t.Fatalf("%s: %s stored on %s: round %d after %d upstream: per-device order broken", kind, f[1], f[0], r, last[key])
		}
		last[key] = r
	}
	var missing []string
	for p := range acked {
		if seen[p] == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s: %d of %d pub-acked messages never arrived, e.g. %v", kind, len(missing), len(acked), missing[:min(10, len(missing))])
	}
	return dupes
}

// TestUplinkClusterHTTPMQTT: TestUplinkClusterLeaderKill's LAN with the
// other two kinds of uplink: three gateways configure an HTTP uplink to a
// receiver and an MQTT uplink to a real mosquitto, both on a fourth host of
// the LAN. Mid-stream the groups' leader is killed with SIGKILL and comes
// back. Every pub-acked record reaches both upstreams, per storing node and
// device in publish order of first arrival (HTTP and MQTT are at least
// once: duplicates are counted, not refused), and the uplinks of at least
// two nodes sent.
func TestUplinkClusterHTTPMQTT(t *testing.T) {
	l := newLAN(t, 4)
	host := l.addr(3)

	// The HTTP receiver, inside the fourth host's namespace.
	var web upArrivals
	ln := listenInNetns(t, l.ns(3), host+":8080")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var got []string
		for sc.Scan() {
			var rec struct {
				ID            string `json:"id"`
				PayloadBase64 string `json:"payload_base64"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			b, err := base64.StdEncoding.DecodeString(rec.PayloadBase64)
			if err != nil || rec.ID == "" {
				http.Error(w, "bad record", http.StatusBadRequest)
				return
			}
			got = append(got, string(b))
		}
		for _, p := range got {
			web.add(p)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})

	// mosquitto and a QoS 1 subscriber on the same host.
	mosq := requireTool(t, "mosquitto", "/usr/sbin/mosquitto")
	msub := requireTool(t, "mosquitto_sub", "/usr/bin/mosquitto_sub")
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listener 1883 %s\nallow_anonymous true\nmax_queued_messages 0\n", host)), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := l.command(3, nil, mosq, "-c", conf)
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Process.Kill(); broker.Wait() })
	var iot upArrivals
	probed := make(chan struct{})
	var probeOnce sync.Once
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var sub = l.command(3, nil, msub, "-h", host, "-p", "1883", "-t", "plant3/#", "-q", "1", "-v", "-i", "e2e-sub", "-c")
	sub.Stdout = pw
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if line == "plant3/probe probe" {
				probeOnce.Do(func() { close(probed) })
				continue
			}
			if _, p, ok := strings.Cut(line, " "); ok && strings.HasPrefix(line, "plant3/") {
				iot.add(p)
			}
		}
	}()
	waitFor(t, "mosquitto up", 30*time.Second, func() bool {
		c, err := (nsDialer{ns: l.ns(3), timeout: time.Second}).Dial("tcp", host+":1883")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { sub.Process.Kill(); sub.Wait(); <-subDone })
	mpub := requireTool(t, "mosquitto_pub", "/usr/bin/mosquitto_pub")
	waitFor(t, "the subscriber to get a probe", 30*time.Second, func() bool {
		l.run(3, nil, 10*time.Second, mpub, "-h", host, "-p", "1883", "-t", "plant3/probe", "-m", "probe", "-q", "1")
		select {
		case <-probed:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	})

	yaml := fmt.Sprintf(`uplinks:
  - name: web
    type: http
    timeout: 2s
    retry_min: 50ms
    retry_max: 1s
    http: {url: "http://%[1]s:8080/ingest", batch: 50}
  - name: iot
    type: mqtt
    timeout: 2s
    retry_min: 50ms
    retry_max: 1s
    mqtt: {broker: "tcp://%[1]s:1883", topic: "plant3/{device}"}
`, host)
	specs := lanTrio()
	for i := range specs {
		specs[i].Groups, specs[i].YAML = []string{}, yaml
	}
	const webGroup, iotGroup = "telemetry.> uplink:web", "telemetry.> uplink:iot"
	nodes := l.startNodes(specs...)
	waitNodes(t, "every node to list all others and agree on gw-c for both uplink groups", 60*time.Second, nodes, func(sts []lanStatus) bool {
		lw, ok1 := agreedLeader(sts, webGroup)
		li, ok2 := agreedLeader(sts, iotGroup)
		return ok1 && ok2 && lw == "gw-c" && li == "gw-c" && peersAre(sts, nodes)
	})

	const devices, shared = 6, 2
	pubs := make([]*publisher, len(nodes))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		pubs[i] = newPublisherOn(t, n.nats(publisherOptions()...), 100)
		wg.Add(1)
		go func(p *publisher, id string) {
			defer wg.Done()
			for r := 1; ; r++ {
				for d := 0; d < devices+shared; d++ {
					dev := fmt.Sprintf("%s-d%02d", id, d)
					if d >= devices {
						dev = fmt.Sprintf("shared-%d", d-devices)
					}
					p.publish(dev, fmt.Sprintf("%s|%s|%d", id, dev, r))
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}(pubs[i], n.id)
	}
	stopTraffic := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopTraffic()

	both := func(n int) func() bool {
		return func() bool { return web.distinct() >= n && iot.distinct() >= n }
	}
	waitFor(t, "both upstreams to fill before the kill", 120*time.Second, both(600))
	victim := nodes[2]
	victim.kill()
	freeSlots := make(chan struct{})
	var freeWG sync.WaitGroup
	freeWG.Add(1)
	go func() { // publishes whose answers died with gw-c hold window slots
		defer freeWG.Done()
		for {
			select {
			case <-freeSlots:
				return
			case <-time.After(3 * time.Second):
				for len(pubs[2].window) > 0 {
					select {
					case <-pubs[2].window:
					default:
					}
				}
			}
		}
	}()
	defer func() {
		close(freeSlots)
		freeWG.Wait()
	}()
	atKill := min(web.distinct(), iot.distinct())
	rest := nodes[:2]
	waitNodes(t, "gw-a and gw-b to elect gw-b for both uplink groups", 60*time.Second, rest, func(sts []lanStatus) bool {
		lw, ok1 := agreedLeader(sts, webGroup)
		li, ok2 := agreedLeader(sts, iotGroup)
		return ok1 && ok2 && lw == "gw-b" && li == "gw-b" && peersAre(sts, rest)
	})
	waitFor(t, "the survivors to forward after the failover", 120*time.Second, both(atKill+300))
	victim.restart()
	waitNodes(t, "the restarted gw-c to lead both uplink groups", 60*time.Second, nodes, func(sts []lanStatus) bool {
		lw, ok1 := agreedLeader(sts, webGroup)
		li, ok2 := agreedLeader(sts, iotGroup)
		return ok1 && ok2 && lw == "gw-c" && li == "gw-c" && peersAre(sts, nodes)
	})
	atBack := min(web.distinct(), iot.distinct())
	waitFor(t, "forwarding after gw-c came back", 120*time.Second, both(atBack+300))
	stopTraffic()

	acked := map[string]pubAck{}
	for _, p := range pubs {
		maps.Copy(acked, p.ackedPayloads())
	}
	sentBy := map[string][]string{}
	waitFor(t, "both uplink groups drained", 120*time.Second, func() bool {
		clear(sentBy)
		for _, n := range nodes {
			ups, err := n.uplinks()
			if err != nil {
				return false
			}
			for _, u := range ups {
				if u.Held != 0 || (u.Leading && u.LagRecords != 0) {
					return false
				}
				if u.Acked > 0 {
					sentBy[u.Name] = append(sentBy[u.Name], n.id)
				}
			}
		}
		return web.distinct() >= len(acked) && iot.distinct() >= len(acked)
	})
	webDupes := web.check(t, "http", acked)
	iotDupes := iot.check(t, "mqtt", acked)
	for _, kind := range []string{"web", "iot"} {
		if len(sentBy[kind]) < 2 {
			t.Errorf("uplink %s sent from %v, want at least two nodes", kind, sentBy[kind])
		}
	}
	t.Logf("%d pub-acked; http: %d arrivals, %d duplicates, sent by %v; mqtt: %d arrivals, %d duplicates, sent by %v",
		len(acked), len(web.snapshot()), webDupes, sentBy["web"], len(iot.snapshot()), iotDupes, sentBy["iot"])
}

// namedUplink is one uplink of a LAN node's /v1/status.
type namedUplink struct {
	Name       string `json:"name"`
	Leading    bool   `json:"leading"`
	LagRecords uint64 `json:"lag_records"`
	Held       int    `json:"held"`
	Acked      uint64 `json:"acked"`
}

func (n *lanNode) uplinks() ([]namedUplink, error) {
	resp, err := n.client.Get(n.httpURL() + "/v1/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Uplinks []namedUplink `json:"uplinks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return st.Uplinks, nil
}
