package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nsqio/go-nsq"
)

// groupsToken is http.token in the lifecycle tests.
const groupsToken = "groups-t0ken-42"

type groupEntry struct {
	Name       string         `json:"name"`
	Subject    string         `json:"subject"`
	Kind       string         `json:"kind"`
	NSQChannel bool           `json:"nsq_channel"`
	Declared   string         `json:"declared"`
	Members    map[string]int `json:"members"`
	Leader     string         `json:"leader"`
	Expires    *time.Time     `json:"expires"`
}

// groupsAPI calls the groups API with the token; it returns the status and
// the body.
func groupsAPI(t testing.TB, n *node, method, path, token string) (int, []byte) {
	t.Helper()
	code, body := nsqHTTP(t, n, method, path, token, nil)
	return code, []byte(body)
}

func listGroups(t testing.TB, n *node, token string) map[string]groupEntry {
	t.Helper()
	code, body := groupsAPI(t, n, "GET", "/v1/groups", token)
	var ans struct {
		Groups []groupEntry `json:"groups"`
	}
	if err := json.Unmarshal(body, &ans); code != 200 || err != nil {
		t.Fatalf("GET /v1/groups: %d %v: %s", code, err, body)
	}
	out := map[string]groupEntry{}
	for _, g := range ans.Groups {
		out[g.Name] = g
	}
	return out
}

func membersOf(g groupEntry) int {
	n := 0
	for _, c := range g.Members {
		n += c
	}
	return n
}

func waitGroup(t testing.TB, n *node, name, what string, cond func(g groupEntry, ok bool) bool) {
	t.Helper()
	waitFor(t, name+": "+what, time.Minute, func() bool {
		g, ok := listGroups(t, n, groupsToken)[name]
		return cond(g, ok)
	})
}

// TestGroupLifecycle: every kind of group (core NATS queue group, NSQ
// channel, JetStream consumer, uplink, one declared in the configuration) is
// listed by GET /v1/groups, `edgeq groups ls` and `nats consumer ls`; one
// with members, an uplink's and a declared one are refused deletion with
// the reason; memberless ones are deleted by the API, `edgeq groups rm` and
// `nats consumer rm`; an undeclared group without members goes by itself
// after group_ttl; the token guards it all.
func TestGroupLifecycle(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n, nsqAddr := newNSQNode(t, fmt.Sprintf(`http:
  token: %s
queue:
  group_ttl: 1h
groups:
  - {subject: telemetry.>, queue: declared}
uplinks:
  - name: up
    type: http
    timeout: 500ms
    retry_min: 50ms
    retry_max: 500ms
    http:
      url: http://127.0.0.1:%d/ingest
`, groupsToken, freePort(t)))
	n.start()
	cli := func(args ...string) (string, error) {
		return runCmd(natsBin, append([]string{"--server", n.url(), "--timeout", "10s"}, args...)...)
	}
	edgeq := func(args ...string) (string, error) {
		return runCmd(edgeqBin, append(append([]string{"groups"}, args...), "--http", n.httpURL(), "--token", groupsToken)...)
	}

	// A core NATS queue subscriber, an NSQ consumer, a JetStream durable.
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	core, err := nc.QueueSubscribeSync("telemetry.>", "coreq")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	cons, err := nsq.NewConsumer("telemetry", "chan1", nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	cons.SetLogger(nil, nsq.LogLevelError)
	cons.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error { return nil }))
	if err := cons.ConnectToNSQD(nsqAddr); err != nil {
		t.Fatal(err)
	}
	defer cons.Stop()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "TELEMETRY", jetstream.ConsumerConfig{Durable: "jsdur"}); err != nil {
		t.Fatal(err)
	}

	if code, _ := groupsAPI(t, n, "GET", "/v1/groups", ""); code != 401 {
		t.Fatalf("GET /v1/groups without the token: %d", code)
	}
	if code, _ := groupsAPI(t, n, "DELETE", "/v1/groups/coreq", "wrong"); code != 401 {
		t.Fatalf("DELETE with a wrong token: %d", code)
	}
	waitGroup(t, n, "chan1", "one member", func(g groupEntry, ok bool) bool { return ok && membersOf(g) == 1 })
	waitGroup(t, n, "coreq", "one member", func(g groupEntry, ok bool) bool { return ok && membersOf(g) == 1 })
	gs := listGroups(t, n, groupsToken)
	for name, want := range map[string]groupEntry{
		"coreq":     {Kind: "queue", NSQChannel: true},
		"chan1":     {Kind: "queue", NSQChannel: true},
		"jsdur":     {Kind: "jetstream", NSQChannel: true, Declared: "jetstream"},
		"uplink:up": {Kind: "uplink", NSQChannel: true, Declared: "uplinks[0]"},
		"declared":  {Kind: "queue", NSQChannel: true, Declared: "groups[0]"},
	} {
		g, ok := gs[name]
		if !ok || g.Kind != want.Kind || g.NSQChannel != want.NSQChannel || g.Declared != want.Declared || g.Subject != "telemetry.>" || g.Leader != "e2e-node" {
			t.Fatalf("group %s: %+v (listed %v), want %+v", name, g, ok, want)
		}
	}
	out, err := edgeq("ls")
	if err != nil {
		t.Fatalf("edgeq groups ls: %v %s", err, out)
	}
	for _, want := range []string{"coreq", "queue/nsq", "jsdur", "jetstream", "uplink:up", "declared (uplinks[0])", "declared (groups[0])"} {
		if !strings.Contains(out, want) {
			t.Fatalf("edgeq groups ls lacks %q:\n%s", want, out)
		}
	}
	out, err = cli("consumer", "ls", "TELEMETRY", "--names")
	if err != nil {
		t.Fatalf("nats consumer ls: %v %s", err, out)
	}
	for _, want := range []string{"coreq", "chan1", "jsdur", "uplink:up", "declared"} {
		if !strings.Contains(out, want) {
			t.Fatalf("nats consumer ls lacks %q:\n%s", want, out)
		}
	}
	if out, err := cli("consumer", "info", "TELEMETRY", "coreq"); err != nil || !strings.Contains(out, "edgeq queue group") {
		t.Fatalf("nats consumer info of a core group: %v %s", err, out)
	}

	// Refusals, each saying why.
	for _, tc := range []struct{ name, want string }{
		{"coreq", "has 1 on e2e-node"},
		{"uplink:up", "uplinks[0]"},
		{"declared", "groups[0]"},
	} {
		code, body := groupsAPI(t, n, "DELETE", "/v1/groups/"+tc.name, groupsToken)
		if code != 409 || !strings.Contains(string(body), tc.want) {
			t.Fatalf("DELETE %s: %d %s, want 409 naming %q", tc.name, code, body, tc.want)
		}
	}
	if code, body := groupsAPI(t, n, "DELETE", "/v1/groups/nosuch", groupsToken); code != 404 {
		t.Fatalf("DELETE of an unknown group: %d %s", code, body)
	}
	if out, err := cli("consumer", "rm", "TELEMETRY", "chan1", "-f"); err == nil || !strings.Contains(out, "has 1 on") {
		t.Fatalf("nats consumer rm of a channel with a consumer: %v %s", err, out)
	}
	if out, err := edgeq("rm", "coreq"); err == nil || !strings.Contains(out, "stop its workers first") {
		t.Fatalf("edgeq groups rm of a group with a member: %v %s", err, out)
	}

	// Without members they go: by edgeq groups rm, nats consumer rm, the API.
	core.Unsubscribe()
	nc.Flush()
	waitGroup(t, n, "coreq", "no member", func(g groupEntry, ok bool) bool { return ok && membersOf(g) == 0 })
	if out, err := edgeq("rm", "coreq"); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("edgeq groups rm coreq: %v %s", err, out)
	}
	cons.Stop()
	<-cons.StopChan
	waitGroup(t, n, "chan1", "no member", func(g groupEntry, ok bool) bool { return ok && membersOf(g) == 0 })
	if out, err := cli("consumer", "rm", "TELEMETRY", "chan1", "-f"); err != nil {
		t.Fatalf("nats consumer rm chan1: %v %s", err, out)
	}
	if code, body := groupsAPI(t, n, "DELETE", "/v1/groups/jsdur", groupsToken); code != 200 {
		t.Fatalf("DELETE jsdur: %d %s", code, body)
	}
	if out, err := cli("consumer", "info", "TELEMETRY", "jsdur"); err == nil {
		t.Fatalf("the consumer of a deleted group is still there: %s", out)
	}
	gs = listGroups(t, n, groupsToken)
	for _, gone := range []string{"coreq", "chan1", "jsdur"} {
		if _, ok := gs[gone]; ok {
			t.Fatalf("%s still listed after its delete: %+v", gone, gs)
		}
	}
	if v := metricValueToken(t, n, "edgeq_dispatch_deleted_groups_total"); v < 3 {
		t.Fatalf("edgeq_dispatch_deleted_groups_total %v after three deletes", v)
	}

	// An abandoned group goes by itself after group_ttl (2s on another
	// node, so that no group above expires before the test deletes it); a
	// declared one stays.
	en := newNode(t, fmt.Sprintf("http:\n  token: %s\nqueue:\n  group_ttl: 2s\ngroups:\n  - {subject: telemetry.>, queue: declared}\n", groupsToken))
	en.start()
	enc, err := nats.Connect(en.url())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	removed0 := metricValueToken(t, en, "edgeq_dispatch_removed_groups_total")
	once, err := enc.QueueSubscribeSync("telemetry.>", "oneshot")
	if err != nil {
		t.Fatal(err)
	}
	enc.Flush()
	waitGroup(t, en, "oneshot", "one member", func(g groupEntry, ok bool) bool { return ok && membersOf(g) == 1 })
	once.Unsubscribe()
	enc.Flush()
	waitGroup(t, en, "oneshot", "an expiry time", func(g groupEntry, ok bool) bool { return !ok || g.Expires != nil })
	waitGroup(t, en, "oneshot", "removal after group_ttl", func(_ groupEntry, ok bool) bool { return !ok })
	// Counted once its runner stopped and its offsets went: just after it
	// left the list.
	waitFor(t, "edgeq_dispatch_removed_groups_total to count it", time.Minute, func() bool {
		return metricValueToken(t, en, "edgeq_dispatch_removed_groups_total") > removed0
	})
	if _, ok := listGroups(t, en, groupsToken)["declared"]; !ok {
		t.Fatal("a declared group expired")
	}
}

// metricValueToken reads one series of /metrics with the groups token.
func metricValueToken(t testing.TB, n *node, series string) float64 {
	t.Helper()
	code, body := groupsAPI(t, n, "GET", "/metrics", groupsToken)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// TestGroupDeleteCluster: two nodes with static peers on loopback. A group
// whose member is on the other node is refused; without members it is
// deleted through the node that does not lead it, and goes from both; a new
// subscriber makes it anew and gets messages. A JetStream consumer's
// delete takes its group from both. With a peer down, a delete is refused,
// naming it.
func TestGroupDeleteCluster(t *testing.T) {
	pa, pb := freePort(t), freePort(t)
	conf := func(listen, prio int, peer int) string {
		return fmt.Sprintf("queue:\n  group_ttl: 1h\ncluster:\n  name: plant\n  secret: 0123456789abcdef-plant-secret\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 200ms\n  failure_timeout: 3s\n  peers:\n    - 127.0.0.1:%d\n", prio, listen, peer)
	}
	a, b := newNode(t, conf(pa, 1, pb)), newNode(t, conf(pb, 5, pa))
	a.nodeID, b.nodeID = "gw-a", "gw-b"
	a.start()
	b.start()
	nodes := map[string]*node{"gw-a": a, "gw-b": b}
	list := func(n *node) map[string]groupEntry { return listGroups(t, n, "") }
	// Queue names whose leader (rendezvous hash) differs: one led by each.
	ncA, err := nats.Connect(a.url())
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	sub, err := ncA.QueueSubscribeSync("telemetry.>", "cq")
	if err != nil {
		t.Fatal(err)
	}
	ncA.Flush()
	var leader string
	waitFor(t, "both nodes to know cq, its member and its leader", time.Minute, func() bool {
		ga, gb := list(a)["cq"], list(b)["cq"]
		leader = ga.Leader
		return ga.Members["gw-a"] == 1 && gb.Members["gw-a"] == 1 && leader != "" && gb.Leader == leader
	})
	other := "gw-a"
	if leader == "gw-a" {
		other = "gw-b"
	}
	if code, body := groupsAPI(t, b, "DELETE", "/v1/groups/cq", ""); code != 409 || !strings.Contains(string(body), "1 on gw-a") {
		t.Fatalf("delete of a group with a member on the other node: %d %s", code, body)
	}
	sub.Unsubscribe()
	ncA.Flush()
	waitFor(t, "cq without members on both", time.Minute, func() bool {
		return membersOf(list(a)["cq"]) == 0 && membersOf(list(b)["cq"]) == 0
	})
	if code, body := groupsAPI(t, nodes[other], "DELETE", "/v1/groups/cq", ""); code != 200 {
		t.Fatalf("delete through %s (the leader is %s): %d %s", other, leader, code, body)
	}
	waitFor(t, "cq gone from both nodes", time.Minute, func() bool {
		_, inA := list(a)["cq"]
		_, inB := list(b)["cq"]
		return !inA && !inB
	})

	// A new subscriber makes it anew: on b, fed by a publish on a.
	ncB, err := nats.Connect(b.url())
	if err != nil {
		t.Fatal(err)
	}
	defer ncB.Close()
	again, err := ncB.QueueSubscribeSync("telemetry.>", "cq")
	if err != nil {
		t.Fatal(err)
	}
	ncB.Flush()
	waitFor(t, "cq again with its member on both", time.Minute, func() bool {
		return list(a)["cq"].Members["gw-b"] == 1 && list(b)["cq"].Leader != "" && list(a)["cq"].Leader == list(b)["cq"].Leader
	})
	got := false
	waitFor(t, "a message of a to the new member on b", time.Minute, func() bool {
		if !got {
			if _, err := ncA.Request("telemetry.dev-1", []byte("x"), 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		m, err := again.NextMsg(time.Second)
		if err == nil {
			m.Ack()
			got = true
		}
		return got
	})

	// A JetStream consumer deleted in the cluster: its group leaves both.
	js, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(t.Context(), "TELEMETRY", jetstream.ConsumerConfig{Durable: "jc"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "jc on both", time.Minute, func() bool {
		_, inA := list(a)["jc"]
		_, inB := list(b)["jc"]
		return inA && inB
	})
	if err := js.DeleteConsumer(t.Context(), "TELEMETRY", "jc"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "jc's group gone from both", time.Minute, func() bool {
		_, inA := list(a)["jc"]
		_, inB := list(b)["jc"]
		return !inA && !inB
	})

	// With b down, a delete on a is refused, naming b.
	dq, err := ncA.QueueSubscribeSync("telemetry.>", "dq")
	if err != nil {
		t.Fatal(err)
	}
	ncA.Flush()
	waitFor(t, "dq on a", time.Minute, func() bool { return list(a)["dq"].Members["gw-a"] == 1 })
	b.kill()
	waitFor(t, "a to see b gone", time.Minute, func() bool {
		var st struct {
			Cluster struct {
				Peers []any `json:"peers"`
			} `json:"cluster"`
		}
		return readStatus(a, &st) && len(st.Cluster.Peers) == 0
	})
	dq.Unsubscribe()
	ncA.Flush()
	waitFor(t, "dq without members", time.Minute, func() bool { return membersOf(list(a)["dq"]) == 0 })
	if code, body := groupsAPI(t, a, "DELETE", "/v1/groups/dq", ""); code != 409 || !strings.Contains(string(body), "gw-b would bring") {
		t.Fatalf("delete with gw-b down: %d %s", code, body)
	}
}

// TestGroupExpiryCluster: in a cluster, abandoned groups leave every node
// after group_ttl: the leader deletes them everywhere; a declared one
// stays.
func TestGroupExpiryCluster(t *testing.T) {
	pa, pb := freePort(t), freePort(t)
	conf := func(listen, prio int, peer int) string {
		return fmt.Sprintf("queue:\n  group_ttl: 2s\ngroups:\n  - {subject: telemetry.>, queue: declared}\ncluster:\n  name: plant\n  secret: 0123456789abcdef-plant-secret\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 200ms\n  failure_timeout: 3s\n  peers:\n    - 127.0.0.1:%d\n", prio, listen, peer)
	}
	a, b := newNode(t, conf(pa, 1, pb)), newNode(t, conf(pb, 5, pa))
	a.nodeID, b.nodeID = "gw-a", "gw-b"
	a.start()
	b.start()
	list := func(n *node) map[string]groupEntry { return listGroups(t, n, "") }
	nc, err := nats.Connect(a.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// gw-b (priority 5) leads them; their members were on gw-a.
	for _, q := range []string{"tq1", "tq2", "tq3"} {
		sub, err := nc.QueueSubscribeSync("telemetry.>", q)
		if err != nil {
			t.Fatal(err)
		}
		nc.Flush()
		waitFor(t, q+" on both with a leader", time.Minute, func() bool {
			return list(b)[q].Members["gw-a"] == 1 && list(a)[q].Leader != "" && list(a)[q].Leader == list(b)[q].Leader
		})
		sub.Unsubscribe()
	}
	nc.Flush()
	waitFor(t, "the abandoned groups gone from both after group_ttl", 2*time.Minute, func() bool {
		la, lb := list(a), list(b)
		for _, q := range []string{"tq1", "tq2", "tq3"} {
			if _, ok := la[q]; ok {
				return false
			}
			if _, ok := lb[q]; ok {
				return false
			}
		}
		return true
	})
	if _, ok := list(a)["declared"]; !ok {
		t.Fatal("a declared group expired")
	}
}
