package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func peerConf(listen, prio int, peers ...int) string {
	s := fmt.Sprintf("cluster:\n  name: plant\n  secret: 0123456789abcdef-plant-secret\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 100ms\n  failure_timeout: 1s\n  peers:\n", prio, listen)
	for _, p := range peers {
		s += fmt.Sprintf("    - 127.0.0.1:%d\n", p)
	}
	return s
}

// vmRSS reads a process's resident set from /proc/<pid>/status, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestPeerPortPreAuthFlood: 200 unauthenticated connections to the peer
// port announcing the largest frames (new and old protocol) or holding a
// handshake open cost the node less than 16 MiB of RSS, and NATS
// publishers keep getting durable acks meanwhile.
func TestPeerPortPreAuthFlood(t *testing.T) {
	if nodeWrapper != "" {
		t.Skip("RSS of the node under an emulator is the emulator's")
	}
	pp := freePort(t)
	n := newNode(t, peerConf(pp, 1))
	n.start()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	publish := func(k int) {
		t.Helper()
		for i := 0; i < k; i++ {
			if _, err := nc.Request(fmt.Sprintf("telemetry.dev-%d", i%10), []byte("x"), 10*time.Second); err != nil {
				t.Fatalf("durable publish during the flood: %v", err)
			}
		}
	}
	publish(200)
	before := vmRSS(t, n.cmd.Process.Pid)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", pp))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 0: // the largest length the header can say
			_, _ = c.Write([]byte("EQP2\x01\xff\xff\xff\xff"))
		case 1: // the old protocol's largest frame
			_, _ = c.Write([]byte("EQP1\x01\x00\x80\x00\x00"))
		default: // a handshake frame that never comes
			_, _ = c.Write([]byte("EQP2\x01\x00\x00\x10\x00"))
		}
	}
	publish(200)
	time.Sleep(500 * time.Millisecond)
	during := vmRSS(t, n.cmd.Process.Pid)
	t.Logf("VmRSS before %d KiB, with 200 pre-auth connections %d KiB (+%d KiB)", before>>10, during>>10, (during-before)>>10)
	if during-before > 16<<20 {
		t.Fatalf("200 pre-auth connections cost %d KiB", (during-before)>>10)
	}
	v := scrapeMetrics(t, n, "")
	if v["edgeq_cluster_busy_handshakes_total"]+v["edgeq_cluster_failed_handshakes_total"] < 60 {
		t.Fatalf("bogus handshakes not counted: busy %v failed %v", v["edgeq_cluster_busy_handshakes_total"], v["edgeq_cluster_failed_handshakes_total"])
	}
	if v["edgeq_cluster_handshakes_in_progress"] > 16 {
		t.Fatalf("%v handshakes in progress, more than the bound", v["edgeq_cluster_handshakes_in_progress"])
	}
}

// TestPeerRelayAttack runs the attack of issue 13 between two real nodes: a
// relay forwards HELLO and HELLOACK, drops the dialer's AUTH, answers
// "accepted" itself and sends forged heartbeats. gw-a never lists gw-b (or
// the relay) as a peer and counts the forged frames as refused. Switched
// to forwarding bytes unchanged, the same relay is a plain TCP proxy, and
// the two nodes become peers through it.
func TestPeerRelayAttack(t *testing.T) {
	pa, pb := freePort(t), freePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var transparent atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayConn(c, fmt.Sprintf("127.0.0.1:%d", pb), transparent.Load())
		}
	}()
	relayPort := ln.Addr().(*net.TCPAddr).Port
	a := newNode(t, peerConf(pa, 1, relayPort))
	b := newNode(t, peerConf(pb, 1000000))
	a.nodeID, b.nodeID = "gw-a", "gw-b"
	b.start()
	a.start()
	type status struct {
		Cluster struct {
			Peers []struct {
				Node string `json:"Node"`
			} `json:"peers"`
		} `json:"cluster"`
	}
	peers := func(n *node) int {
		out, err := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		var st status
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			return -1
		}
		return len(st.Cluster.Peers)
	}
	waitFor(t, "forged frames refused at gw-a", 30*time.Second, func() bool {
		return scrapeMetrics(t, a, "")["edgeq_cluster_refused_frames_total"] >= 3
	})
	if p := peers(a); p != 0 {
		t.Fatalf("gw-a lists %d peers behind the relay", p)
	}
	if p := peers(b); p != 0 {
		t.Fatalf("gw-b lists %d peers", p)
	}
	if v := scrapeMetrics(t, a, ""); v["edgeq_cluster_peer_ups_total"] != 0 {
		t.Fatalf("a peer came up at gw-a: %v", v["edgeq_cluster_peer_ups_total"])
	}
	transparent.Store(true)
	waitFor(t, "gw-a and gw-b peers through a transparent proxy", 30*time.Second, func() bool {
		return peers(a) == 1 && peers(b) == 1
	})
}

// relayConn relays one connection to target. Unless transparent, it
// forwards HELLO, then HELLOACK, drops the dialer's AUTH and answers
// itself: "accepted", then forged heartbeats (a plaintext one, one in the
// sealed layout with a made-up tag).
func relayConn(c net.Conn, target string, transparent bool) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	if transparent {
		go func() { _, _ = io.Copy(up, c) }()
		_, _ = io.Copy(c, up)
		return
	}
	frame := func(r io.Reader) []byte {
		hdr := make([]byte, 9)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return nil
		}
		n := binary.BigEndian.Uint32(hdr[5:])
		if n > 4096 {
			return nil
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil
		}
		return append(hdr, body...)
	}
	hello := frame(c)
	if hello == nil {
		return
	}
	_, _ = up.Write(hello)
	ack := frame(up)
	if ack == nil {
		return
	}
	_, _ = c.Write(ack)
	_ = frame(c) // AUTH: dropped
	hb := binary.AppendVarint(nil, 1000000)
	hb = binary.AppendUvarint(hb, 10)
	plain := append([]byte("EQP2\x05"), binary.BigEndian.AppendUint32(nil, uint32(len(hb)))...)
	_, _ = c.Write([]byte("EQP2\x05\x00\x00\x00\x00")) // "accepted"
	for i := 0; i < 5; i++ {
		sealed := binary.BigEndian.AppendUint32(nil, uint32(1+len(hb)+16))
		sealed = append(append(append(sealed, 5), hb...), make([]byte, 16)...)
		if i%2 == 1 {
			sealed = append(plain, hb...)
		}
		if _, err := c.Write(sealed); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
