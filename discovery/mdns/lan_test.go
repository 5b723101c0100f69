package mdns

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDiscoveryOnALAN runs five nodes and a sniffer, each in its own network
// namespace on one bridge: gw-1..gw-3 of cluster alpha, gw-4 and gw-5 of
// cluster beta. No static peers.
//
//  1. With announcements off, the nodes find the nodes of their own cluster
//     by browsing (hashicorp's Query and our legacy unicast answers) and
//     never report the other cluster.
//  2. gw-2 stops: its goodbye removes it from gw-1 and gw-3 within 2 s,
//     although their expiry is 30 s and 180 s.
//  3. gw-2 restarts with announcements: gw-3, whose next browse is a minute
//     away, lists it within 15 s. The sniffer sees two announcements 1 s
//     apart and the goodbye before them, as RFC 6762 asks.
//  4. A legacy query gets a conventional unicast answer, a direct unicast
//     query a unicast answer, and a QM query multicast answers from every
//     node.
func TestDiscoveryOnALAN(t *testing.T) {
	l := newLAN(t, 6)
	sniff := l.spawn("sniffer", l.nodes[5], "sniff")
	sniff.waitKey("READY", waitWindow)
	node := func(i int, cluster string, env ...string) *child {
		id := fmt.Sprintf("gw-%d", i+1)
		env = append([]string{"NODE_ID=" + id, "NODE_CLUSTER=" + cluster,
			fmt.Sprintf("NODE_PRIORITY=%d", 10+i), fmt.Sprintf("NODE_PORT=%d", 7401+i)}, env...)
		c := l.spawn(id, l.nodes[i], "node", env...)
		return c
	}
	quiet := []string{"ANNOUNCE=0", "BROWSE_INTERVAL=1s", "EXPIRY_ROUNDS=30"}
	n1 := node(0, "alpha", quiet...)
	n2 := node(1, "alpha", quiet...)
	n4 := node(3, "beta", quiet...)
	n5 := node(4, "beta", quiet...)
	for _, c := range []*child{n1, n2, n4, n5} {
		c.waitKey("READY", waitWindow)
	}
	// gw-3 browses once at start, then a minute later.
	n3 := node(2, "alpha", "ANNOUNCE=0", "BROWSE_INTERVAL=60s", "EXPIRY_ROUNDS=3")
	n3.waitKey("READY", waitWindow)

	// 1. Discovery by browsing.
	n3.waitPeers(waitWindow, "gw-1", "gw-2")
	n1.waitPeers(waitWindow, "gw-2", "gw-3")
	_, ps := n2.waitPeers(waitWindow, "gw-1", "gw-3")
	n4.waitPeers(waitWindow, "gw-5")
	n5.waitPeers(waitWindow, "gw-4")
	gw1 := ps[0]
	if gw1.Cluster != "alpha" || gw1.Priority != 10 || gw1.Version != "test-1" || gw1.PeerPort != 7401 ||
		len(gw1.Addrs) != 1 || gw1.Addrs[0].String() != l.addr(0) || gw1.Dial != l.addr(0)+":7401" ||
		gw1.Static || gw1.LastSeen.IsZero() {
		t.Errorf("gw-2's view of gw-1: %+v", gw1)
	}
	// The other cluster stays out for several rounds more.
	time.Sleep(1500 * time.Millisecond)
	for _, c := range []*child{n1, n2, n3} {
		for _, p := range c.peers() {
			if p.Cluster != "alpha" {
				t.Errorf("%s reports %s of cluster %s", c.name, p.ID, p.Cluster)
			}
		}
	}
	if n := len(sniffedResponses(t, sniff, "")); n != 0 {
		t.Fatalf("%d multicast responses before any announcement or QM query; discovery should have used unicast answers to queries", n)
	}

	// 2. Goodbye.
	stopAt := time.Now()
	n2.send("stop")
	if ok := n2.waitKey("STOPPED", waitWindow); ok != "true" {
		t.Fatalf("gw-2 stop: %s", ok)
	}
	for _, c := range []*child{n1, n3} {
		c.waitPeers(waitWindow, slices.DeleteFunc([]string{"gw-1", "gw-3"}, func(s string) bool { return s == c.name })...)
		if d := time.Since(stopAt); d > 2*time.Second {
			t.Errorf("%s dropped gw-2 after %v; a goodbye should take effect at once", c.name, d)
		}
	}
	<-n2.done
	if code := n2.exitCode(); code != 0 {
		t.Errorf("gw-2 exit code %d", code)
	}
	bye := sniffedResponses(t, sniff, l.addr(1)+":5353")
	if len(bye) != 1 {
		t.Fatalf("responses from gw-2: %d, want its goodbye only", len(bye))
	}
	checkRecords(t, "goodbye", bye[0], 0, []string{
		"_edgeq._tcp.local. PTR 0 false", "gw-2._edgeq._tcp.local. SRV 0 true",
		"gw-2.local. A 0 true", "gw-2._edgeq._tcp.local. TXT 0 true"})

	// 3. Restart with announcements; gw-3 is a minute from its next browse.
	restartAt := time.Now()
	n2 = node(1, "alpha", "ANNOUNCE=2", "BROWSE_INTERVAL=60s")
	n2.waitKey("READY", waitWindow)
	n3.waitPeers(15*time.Second, "gw-1", "gw-2") // well before gw-3's next browse, a minute away; 3s was a speed bound
	t.Logf("gw-3 listed the restarted gw-2 %v after its start", time.Since(restartAt))
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	var ann []sniffed
	for time.Now().Before(deadline) {
		if ann = sniffedResponses(t, sniff, l.addr(1)+":5353")[1:]; len(ann) >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ann) != 2 {
		t.Fatalf("announcements from gw-2: %d, want 2", len(ann))
	}
	// One second apart (RFC 6762 8.3): never sooner; later only by as
	// much as a loaded machine delays a timer.
	if gap := ann[1].At.Sub(ann[0].At); gap < 900*time.Millisecond || gap > 5*time.Second {
		t.Errorf("announcements %v apart, want 1 s", gap)
	}
	for _, a := range ann {
		checkRecords(t, "announcement", a, 0, []string{
			"_services._dns-sd._udp.local. PTR 10 false", "_edgeq._tcp.local. PTR 10 false",
			"gw-2._edgeq._tcp.local. SRV 10 true", "gw-2.local. A 10 true", "gw-2._edgeq._tcp.local. TXT 10 true"})
	}

	// 4. Answers on the wire. Wait out the 1 s multicast rate limit of the
	// announcement's records.
	time.Sleep(1100 * time.Millisecond)
	sniff.send("legacy gw-1.local. A")
	raw := sniff.waitKey("LEGACY", waitWindow)
	var legacy sniffed
	if err := json.Unmarshal([]byte(raw), &legacy); err != nil || raw == "null" {
		t.Fatalf("no answer to a legacy query: %s %v", raw, err)
	}
	if legacy.Src != l.addr(0)+":5353" || legacy.ID != 0x4242 || !slices.Equal(legacy.Q, []string{"gw-1.local. A"}) ||
		!slices.Equal(legacy.RR, []string{"gw-1.local. A 10 false", "gw-1.local. NSEC 10 false"}) {
		t.Errorf("legacy answer %+v: want from %s:5353, ID 0x4242, the question echoed, TTL 10, no cache-flush", legacy, l.addr(0))
	}
	// A direct unicast query to port 5353 gets a unicast answer (RFC 6762
	// §5.5). gw-3 browses no more, so no hashicorp Query socket of its own
	// holds port 5353 now, and its passive listener, bound to the group
	// address, takes no unicast datagram from the responder.
	sniff.send("direct " + l.addr(2) + " gw-3.local. A")
	var direct []sniffed
	waitFor(t, 3*time.Second, "the answer to a direct unicast query", func() bool {
		direct = slices.DeleteFunc(sniffedResponses(t, sniff, l.addr(2)+":5353"), func(s sniffed) bool { return !s.Unicast })
		return len(direct) > 0
	})
	if d := direct[0]; d.ID != 0x5353 || !slices.Equal(d.RR, []string{"gw-3.local. A 10 true", "gw-3.local. NSEC 10 true"}) {
		t.Errorf("direct answer %+v: want a unicast answer with the ID echoed", d)
	}

	before := len(sniffedResponses(t, sniff, ""))
	sniff.send("qm _edgeq._tcp.local. PTR")
	var answers []sniffed
	deadline = time.Now().Add(30 * time.Second) // bounds a hang only
	for time.Now().Before(deadline) && len(answers) < 5 {
		time.Sleep(50 * time.Millisecond)
		answers = sniffedResponses(t, sniff, "")[before:]
	}
	var from []string
	for _, a := range answers {
		from = append(from, a.Src)
		if a.Unicast || a.ID != 0 || len(a.Q) != 0 || a.IPTTL != 255 || len(a.RR) == 0 || !strings.HasPrefix(a.RR[0], "_edgeq._tcp.local. PTR 10") {
			t.Errorf("QM answer %+v: want a multicast response, ID 0, no question, IP TTL 255, the PTR first", a)
		}
	}
	slices.Sort(from)
	want := []string{l.addr(0) + ":5353", l.addr(1) + ":5353", l.addr(2) + ":5353", l.addr(3) + ":5353", l.addr(4) + ":5353"}
	if !slices.Equal(from, want) {
		t.Errorf("QM answers from %v, want %v", from, want)
	}
}

// sniffedResponses returns the responses the sniffer saw, from src (all
// when src is "").
func sniffedResponses(t *testing.T, sniff *child, src string) []sniffed {
	t.Helper()
	var out []sniffed
	for _, raw := range sniff.all("SNIFF") {
		var s sniffed
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("sniffed %q: %v", raw, err)
		}
		if s.QR && (src == "" || s.Src == src) {
			out = append(out, s)
		}
	}
	return out
}

// checkRecords checks an unsolicited multicast response: to the group, IP
// TTL 255, the given ID, no question, and exactly the given records.
func checkRecords(t *testing.T, what string, s sniffed, id uint16, rrs []string) {
	t.Helper()
	if s.Unicast || s.IPTTL != 255 || s.ID != id || len(s.Q) != 0 {
		t.Errorf("%s: unicast=%v ipttl=%d id=%d questions=%v", what, s.Unicast, s.IPTTL, s.ID, s.Q)
	}
	if !slices.Equal(s.RR, rrs) {
		t.Errorf("%s records\n got %q\nwant %q", what, s.RR, rrs)
	}
}
