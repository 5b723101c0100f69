package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// upGroup is the status key of the uplink "cloud"'s queue group.
const upGroup = "telemetry.> uplink:cloud"

// lanJetStream runs a real nats-server with JetStream on slot i of the LAN:
// the gateways reach it at its LAN address, the test through its namespace.
func lanJetStream(t *testing.T, l *lan, i int) *jsServer {
	t.Helper()
	s := &jsServer{t: t, bin: requireTool(t, "nats-server", "/usr/sbin/nats-server"), port: 4222, dir: filepath.Join(t.TempDir(), "js"),
		connect: []nats.Option{nats.SetCustomDialer(nsDialer{ns: l.ns(i), timeout: 2 * time.Second})}}
	s.cmd = l.command(i, nil, s.bin, "-js", "-sd", s.dir, "-a", "0.0.0.0", "-p", strconv.Itoa(s.port))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.kill()
		}
	})
	s.waitUp(30 * time.Second)
	s.createStream()
	return s
}

// lanUplink is the uplink part of a LAN node's /v1/status.
type lanUplink struct {
	Leading    bool   `json:"leading"`
	LagRecords uint64 `json:"lag_records"`
	LagBytes   uint64 `json:"lag_bytes"`
	Held       int    `json:"held"`
	Acked      uint64 `json:"acked"`
	LastError  string `json:"last_error"`
}

func (n *lanNode) uplink() (lanUplink, error) {
	resp, err := n.client.Get(n.httpURL() + "/v1/status")
	if err != nil {
		return lanUplink{}, err
	}
	defer resp.Body.Close()
	var st struct {
		Uplinks []lanUplink `json:"uplinks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return lanUplink{}, err
	}
	if len(st.Uplinks) != 1 {
		return lanUplink{}, fmt.Errorf("%s: %d uplinks in /v1/status", n.id, len(st.Uplinks))
	}
	return st.Uplinks[0], nil
}

// TestUplinkClusterLeaderKill: three gateways in their own namespaces find
// each other by mDNS and configure the same JetStream uplink, whose
// nats-server runs on a fourth host of the LAN. Telemetry is published on
// all three (devices of one node each, and devices published on every
// node). Mid-stream the uplink group's leader is killed with SIGKILL, the
// survivors take the group over, and the killed node comes back. Every
// pub-acked message is in the stream exactly once (Nats-Msg-Id dedup; 0
// duplicates), per storing node and device in publish order of first
// occurrence, every Nats-Msg-Id is <storing node>:<device>:<seq>, and the
// uplinks of at least two nodes sent.
func TestUplinkClusterLeaderKill(t *testing.T) {
	l := newLAN(t, 4)
	js := lanJetStream(t, l, 3)
	yaml := fmt.Sprintf(`uplinks:
  - name: cloud
    type: nats
    window: 64
    timeout: 2s
    retry_min: 50ms
    retry_max: 1s
    nats:
      url: nats://%s:4222
      subject: plant3.{device}
`, l.addr(3))
	specs := lanTrio()
	for i := range specs {
		specs[i].Groups, specs[i].YAML = []string{}, yaml
	}
	nodes := l.startNodes(specs...)
	waitNodes(t, "every node to list all others and agree on gw-c for the uplink group", 60*time.Second, nodes, func(sts []lanStatus) bool {
		ld, ok := agreedLeader(sts, upGroup)
		return ok && ld == "gw-c" && peersAre(sts, nodes)
	})

	// Traffic: on each node devices "<node>-dNN" and "shared-N", payload
	// "<node>|<device>|<round>", paced rounds until stopped.
	const devices, shared = 8, 2
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

	waitFor(t, "the stream to fill before the kill", 120*time.Second, func() bool { return js.streamMsgs() >= 1000 })
	leader, victim := "gw-c", nodes[2]
	victim.kill()
	// Publishes to the killed node whose answers died with it hold window
	// slots of its publisher: free them while it is down and restarting.
	freeSlots := make(chan struct{})
	var freeWG sync.WaitGroup
	freeWG.Add(1)
	go func() {
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
	atKill := js.streamMsgs()
	rest := nodes[:2]
	waitNodes(t, "gw-a and gw-b to elect gw-b for the uplink group", 60*time.Second, rest, func(sts []lanStatus) bool {
		ld, ok := agreedLeader(sts, upGroup)
		return ok && ld == "gw-b" && peersAre(sts, rest)
	})
	waitFor(t, "the survivors to forward after the failover", 120*time.Second, func() bool { return js.streamMsgs() >= atKill+500 })
	victim.restart()
	waitNodes(t, "the restarted gw-c to lead the uplink group on all three", 60*time.Second, nodes, func(sts []lanStatus) bool {
		ld, ok := agreedLeader(sts, upGroup)
		return ok && ld == "gw-c" && peersAre(sts, nodes)
	})
	atBack := js.streamMsgs()
	waitFor(t, "forwarding after gw-c came back", 120*time.Second, func() bool { return js.streamMsgs() >= atBack+500 })
	stopTraffic()

	// Everything acked is stored on some node and the group drains it.
	acked := map[string]pubAck{}
	for _, p := range pubs {
		maps.Copy(acked, p.ackedPayloads())
	}
	var ups []lanUplink
	waitFor(t, "the uplink group drained on its leader", 120*time.Second, func() bool {
		ups = ups[:0]
		for _, n := range nodes {
			u, err := n.uplink()
			if err != nil {
				return false
			}
			ups = append(ups, u)
		}
		// Only the leader reports the lag; the others say they do not lead.
		return ups[2].Leading && !ups[0].Leading && !ups[1].Leading && ups[2].LagRecords == 0 &&
			ups[0].Held == 0 && ups[1].Held == 0 && ups[2].Held == 0 && js.streamMsgs() >= uint64(len(acked))
	})
	// edgeq status shows the leader's lag and "-" elsewhere.
	for i, want := range []string{`-\s+-`, `-\s+-`, `0\s+0B`} {
		out, err := l.run(i, nil, 30*time.Second, edgeqBin, "status", "--http", nodes[i].httpURL())
		if err != nil || !regexp.MustCompile(`(?m)^cloud\s+nats\s+\S+\s+`+want+`\s`).MatchString(out) {
			t.Errorf("%s: edgeq status, want LAG and LAG BYTES %s: %v\n%s", nodes[i].id, want, err, out)
		}
	}
	msgs := js.readStream(t)
	dupes := checkClusterUpstream(t, acked, msgs)
	if dupes > 0 {
		t.Errorf("%d duplicates upstream, want 0 (Nats-Msg-Id dedup)", dupes)
	}
	sent := 0
	var bySender []string
	for i, u := range ups {
		if u.Acked > 0 {
			sent++
		}
		bySender = append(bySender, fmt.Sprintf("%s %d", nodes[i].id, u.Acked))
	}
	if sent < 2 {
		t.Errorf("uplinks that sent: %v; want at least two nodes'", bySender)
	}
	t.Logf("%d pub-acked, %d in the stream (%d when %s was killed, %d when it was back), %d duplicates; acked upstream by the uplinks since their start: %s",
		len(acked), len(msgs), atKill, leader, atBack, dupes, strings.Join(bySender, ", "))
}

// checkClusterUpstream compares what the gateways pub-acked with the
// stream: every acked payload ("<node>|<device>|<round>") is there on
// plant3.<device>, with Nats-Msg-Id "<node>:<device>:<seq>" (node: the
// gateway that stored it); per storing node and device, first occurrences
// come in publish order and carry growing seqs; duplicates are counted.
func checkClusterUpstream(t *testing.T, acked map[string]pubAck, msgs []streamMsg) (dupes int) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]int{}
	lastSeq := map[string]uint64{}
	ids := map[string]string{}
	for _, m := range msgs {
		seen[m.payload]++
		if seen[m.payload] > 1 {
			dupes++
			continue
		}
		parts := strings.Split(m.payload, "|")
		if len(parts) != 3 {
			t.Fatalf("unexpected payload %q", m.payload)
		}
		node, dev := parts[0], parts[1]
		round, _ := strconv.Atoi(parts[2])
		if m.subject != "plant3."+dev {
			t.Fatalf("payload %q on subject %q", m.payload, m.subject)
		}
		id := strings.Split(m.msgID, ":")
		seq, err := strconv.ParseUint(id[len(id)-1], 10, 64)
		if len(id) != 3 || id[0] != node || id[1] != dev || err != nil || seq == 0 {
			t.Fatalf("Nats-Msg-Id %q of %q, want %s:%s:<seq>", m.msgID, m.payload, node, dev)
		}
		if other, ok := ids[m.msgID]; ok {
			t.Fatalf("Nats-Msg-Id %q on %q and %q", m.msgID, other, m.payload)
		}
		ids[m.msgID] = m.payload
		key := node + "/" + dev
		if round <= last[key] || seq <= lastSeq[key] {
			t.Fatalf("%s stored on %s: round %d (seq %d) after round %d (seq %d) upstream: per-device order broken",
				dev, node, round, seq, last[key], lastSeq[key])
		}
		last[key], lastSeq[key] = round, seq
	}
	requireUpstream(t, acked, seen)
	return dupes
}
