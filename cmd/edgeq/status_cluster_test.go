package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"edgeq/gateway/apiv1"
)

// clusterStatusAt is node gw-b of cluster "plant" at t seconds, as its
// /v1/status JSON says it: it leads workers (members on gw-a and here) and
// forwards to gw-a; gw-c leads alerts; the group "new" is being elected.
// gw-a dialed in an hour ago and sends 50 frames/s, gw-c was dialed a
// minute ago; gw-d is down and one discovered address never answered.
func clusterStatusAt(t testing.TB, at float64) *apiv1.Status {
	t.Helper()
	now := time.Unix(1000, 0).Add(time.Duration(at * float64(time.Second)))
	st := statusAt(at)
	st.Node, st.NATS, st.HTTP = "gw-b", "127.0.0.1:4222", "127.0.0.1:8222"
	st.Groups = []apiv1.GroupStatus{
		{Filter: "telemetry.>", Queue: "alerts", Members: 2, MembersByNode: map[string]int{"gw-a": 1, "gw-c": 1}},
		{Filter: "telemetry.>", Queue: "new", Members: 0},
		{Filter: "telemetry.>", Queue: "workers", Leading: true, Members: 3, InFlight: 4, Pending: 9, Lag: 7,
			Delivered: uint64(10 * at), Acked: uint64(8 * at), Forwards: uint64(6 * at), LatencyP50ms: 3, LatencyP99ms: 12,
			MembersByNode: map[string]int{"gw-a": 2, "gw-b": 1}},
	}
	st.Cluster = &apiv1.ClusterStatus{
		Name: "plant", Listen: "10.0.0.2:7422",
		Peers: []apiv1.PeerStatus{
			{Node: "gw-a", Addr: "10.0.0.1:50122", Priority: 1, Partitions: 10, Since: time.Unix(1000-3600, 0),
				LastSeen: now.Add(-250 * time.Millisecond), QueuedBytes: 2048,
				FramesIn: uint64(1000 + 50*at), FramesOut: uint64(900 + 40*at), BytesIn: 3 << 20, BytesOut: 90_000},
			{Node: "gw-c", Addr: "10.0.0.3:7422", Priority: 3, Partitions: 4, Dialed: true, Since: time.Unix(1000-60, 0),
				LastSeen: now.Add(-100 * time.Millisecond), FramesIn: 50, FramesOut: 60, BytesIn: 5000, BytesOut: 6000},
		},
		Unreachable: []apiv1.AddrStatus{{Addr: "10.0.0.4:7422", Node: "gw-d", Static: true}, {Addr: "10.0.0.9:7422"}},
		Leaders: map[string]apiv1.GroupLeader{
			"telemetry.> workers": {Leader: "gw-b", Epoch: "7:gw-b", Self: true},
			"telemetry.> alerts":  {Leader: "gw-c", Epoch: "4:gw-c"},
		},
		Refused:    4,
		PeerEvents: apiv1.PeerEvents{RefusedHandshakes: 4, SendQueueOverflows: 1, Ups: 5, Downs: 3, RefusedFrames: 2, FailedHandshakes: 6, BusyHandshakes: 7},
		Election: apiv1.ElectionEvents{Elections: 9, Leaderships: 6, TakeOvers: 2, HandOverTimeouts: 1, HandOvers: 3,
			Deposed: 2, StaleCoordinators: 8, Fenced: 5},
		DataPath: apiv1.DataPathEvents{ForwardsIn: 300, ForwardsRefused: 3, AcksRelayed: 290, RemoteCommits: 77,
			RemoteCommitFailures: 1, FencedRequests: 6},
	}
	// Through the JSON, as `edgeq status` gets it.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out apiv1.Status
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestPrintStatusCluster: a cluster node shows the cluster line, who leads
// each group (and "-" for what only another leader knows), its peers up
// and down with traffic rates, the leaders with members by node, and the
// cluster's counters.
func TestPrintStatusCluster(t *testing.T) {
	reconnected := clusterStatusAt(t, 4)
	reconnected.Cluster.Peers[0].Since = reconnected.Time.Add(-time.Second)
	lost := clusterStatusAt(t, 4)
	lost.Groups[2].Leading = false
	lost.Cluster.Leaders["telemetry.> workers"] = apiv1.GroupLeader{Leader: "gw-c", Epoch: "8:gw-c"}
	dash11 := `(\s+-){11}\s*$`
	tests := []struct {
		name      string
		prev, cur *apiv1.Status
		want      []string // regexps, each must match a line
	}{
		{"first reading", nil, clusterStatusAt(t, 2), []string{
			`^cluster plant  peer listener 10\.0\.0\.2:7422  peers 2 up, 1 down, unanswered addresses 1$`,
			`^GROUP\s+QUEUE\s+LED BY\s+MEMBERS\s+IN FLIGHT\s+PENDING\s+LAG\s+DELIVERED/S`,
			`^telemetry\.>\s+alerts\s+gw-c\s+2` + dash11,
			`^telemetry\.>\s+new\s+\(electing\)\s+0` + dash11,
			`^telemetry\.>\s+workers\s+this node\s+3\s+4\s+9\s+7\s+-\s+-\s+20\s+16\s+0\s+0\s+3ms\s+12ms$`,
			`^PEER\s+ADDRESS\s+PRIORITY\s+PARTITIONS\s+STATE\s+LAST SEEN\s+QUEUED\s+FRAMES IN/S\s+FRAMES OUT/S\s+BYTES IN\s+BYTES OUT$`,
			`^gw-a\s+10\.0\.0\.1:50122 \(in\)\s+1\s+10\s+up 1h0m2s\s+0\.[23]s ago\s+2\.0KiB\s+-\s+-\s+3\.0MiB\s+87\.9KiB$`,
			`^gw-c\s+10\.0\.0\.3:7422\s+3\s+4\s+up 1m2s\s+0\.1s ago\s+0B\s+-\s+-\s+4\.9KiB\s+5\.9KiB$`,
			`^gw-d\s+10\.0\.0\.4:7422\s+-\s+-\s+down(\s+-){6}$`,
			`^\?\s+10\.0\.0\.9:7422\s+-\s+-\s+no answer(\s+-){6}$`,
			`^LEADER\s+EPOCH\s+GROUP\s+QUEUE\s+MEMBERS BY NODE\s+FORWARDS$`,
			`^gw-c\s+4:gw-c\s+telemetry\.>\s+alerts\s+gw-a:1 gw-c:1\s+-$`,
			`^\(electing\)\s+-\s+telemetry\.>\s+new\s+-\s+-$`,
			`^gw-b \(this node\)\s+7:gw-b\s+telemetry\.>\s+workers\s+gw-a:2 gw-b:1\s+12$`,
			`^peers came up 5 times, went down 3; refused peers 4, send-queue overflows 1$`,
			`^peer frames refused \(tampered\) 2; handshakes failed 6, refused as busy 7$`,
			`^elections 9, leaderships won 6 \(handed over 3, deposed 2\), take-overs 2; stale coordinators 8, fenced requests 6$`,
			`^forwards received 300 \(refused 3\), acks relayed 290, remote commits 77 \(failed 1\)$`,
		}},
		{"two seconds later", clusterStatusAt(t, 2), clusterStatusAt(t, 4), []string{
			`^telemetry\.>\s+workers\s+this node\s+3\s+4\s+9\s+7\s+10\.0\s+8\.0\s+40\s+32\s`,
			`^gw-a\s+\S+ \(in\)\s+1\s+10\s+up 1h0m4s\s+\S+ ago\s+2\.0KiB\s+50\.0\s+40\.0\s`,
			`^gw-c\s+.*\s+0\.0\s+0\.0\s+4\.9KiB`,
			`^gw-b \(this node\)\s+7:gw-b\s+telemetry\.>\s+workers\s+gw-a:2 gw-b:1\s+24$`,
		}},
		// A new connection counts from 0: no rate against the old one.
		{"peer reconnected", clusterStatusAt(t, 2), reconnected, []string{
			`^gw-a\s+\S+ \(in\)\s+1\s+10\s+up 1s\s+\S+ ago\s+2\.0KiB\s+-\s+-\s`,
		}},
		// Leadership moved to gw-c: this node knows members only.
		{"leadership lost", clusterStatusAt(t, 2), lost, []string{
			`^telemetry\.>\s+workers\s+gw-c\s+3` + dash11,
			`^gw-c\s+8:gw-c\s+telemetry\.>\s+workers\s+gw-a:2 gw-b:1\s+-$`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printStatus(&b, tt.cur, tt.prev)
			for _, re := range tt.want {
				if !regexp.MustCompile(`(?m)` + re).MatchString(b.String()) {
					t.Errorf("no line matches %s in:\n%s", re, b.String())
				}
			}
		})
	}
}

// TestPrintStatusStandaloneHasNoCluster: without a cluster part nothing of
// the cluster shows, and the GROUP table keeps its columns.
func TestPrintStatusStandaloneHasNoCluster(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, statusAt(4), statusAt(2))
	out := b.String()
	for _, s := range []string{"cluster", "LED BY", "PEER", "LEADER", "elections", "forwards"} {
		if strings.Contains(out, s) {
			t.Errorf("standalone output has %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "\nGROUP        QUEUE  MEMBERS  IN FLIGHT  PENDING  LAG  DELIVERED/S") {
		t.Errorf("the GROUP table changed:\n%s", out)
	}
}
