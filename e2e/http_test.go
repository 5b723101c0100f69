package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestHTTPPublishAndToken(t *testing.T) {
	n := newNode(t, "http:\n  token: t0ken\n")
	n.start()
	post := func(device, body, token string) (int, string) {
		req, _ := http.NewRequest("POST", n.httpURL()+"/v1/publish/"+device, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Edgeq-H-Site", "plant-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("dev-1", "{}", ""); code != http.StatusUnauthorized {
		t.Fatalf("without token: %d", code)
	}
	if code, _ := post("dev-1", "{}", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, body := post("bad%20device", "{}", "t0ken"); code != http.StatusBadRequest {
		t.Fatalf("bad device: %d %s", code, body)
	}
	nc, _ := nats.Connect(n.url())
	defer nc.Close()
	sub, _ := nc.QueueSubscribeSync("telemetry.>", "http")
	nc.Flush()
	code, body := post("dev-1", `{"t":1}`, "t0ken")
	if code != 200 {
		t.Fatalf("publish: %d %s", code, body)
	}
	var ack pubAck
	if err := json.Unmarshal([]byte(body), &ack); err != nil || ack.Seq != 1 || ack.Node != "e2e-node" {
		t.Fatalf("publish answer %s", body)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `{"t":1}` || m.Header.Get("Site") != "plant-1" || m.Header.Get("Content-Type") != "application/json" || m.Header.Get("Edgeq-Source") != "http" {
		t.Fatalf("delivery %q %v", m.Data, m.Header)
	}
	m.Ack()
	// health endpoints need no token
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(n.httpURL() + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, err, resp)
		}
		resp.Body.Close()
	}
}

func TestCLIPubSubStatus(t *testing.T) {
	n := newNode(t, "")
	n.start()
	subOut := make(chan string, 1)
	go func() {
		out, _ := runCmd(edgeqBin, "sub", "--server", n.url(), "--queue", "cli", "--count", "2")
		subOut <- out
	}()
	waitMembers(t, n, "cli", 1) // the group starts at deliver: new
	for i := 1; i <= 2; i++ {
		out, err := runCmd(edgeqBin, "pub", "--server", n.url(), "meter-7", fmt.Sprintf("reading %d", i))
		if err != nil || !strings.Contains(out, fmt.Sprintf(`"seq":%d`, i)) {
			t.Fatalf("edgeq pub: %v %s", err, out)
		}
	}
	select {
	case out := <-subOut:
		if !strings.Contains(out, "reading 1") || !strings.Contains(out, "reading 2") || !strings.Contains(out, "Edgeq-Device: meter-7") {
			t.Fatalf("edgeq sub output:\n%s", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("edgeq sub did not finish")
	}
	out, err := runCmd(edgeqBin, "status", "--http", n.httpURL())
	if err != nil || !strings.Contains(out, "node e2e-node") || !strings.Contains(out, "cli") {
		t.Fatalf("edgeq status: %v\n%s", err, out)
	}
	out, _ = runCmd(edgeqBin, "pub", "--server", n.url(), "meter-7")
	_ = out // reading stdin (empty) publishes an empty message: allowed
}

func TestConnectionLimitsAndStaleClients(t *testing.T) {
	n := newNode(t, "nats:\n  max_connections: 2\n  max_subscriptions: 2\n  ping_interval: 200ms\n  max_pings_out: 2\n")
	n.start()
	a := dialRaw(t, n.natsPort)
	a.send("CONNECT {}\r\nSUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
	if got := a.line(); got != "-ERR 'maximum subscriptions exceeded'" {
		t.Fatalf("third subscription: %q", got)
	}
	// a never answers PING: it is closed as stale after max_pings_out.
	b := dialRaw(t, n.natsPort)
	b.send("CONNECT {}\r\n")
	third, err := nats.Connect(n.url(), nats.NoReconnect())
	if err == nil {
		third.Close()
		t.Fatal("a third connection was accepted with max_connections 2")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "maximum connections") {
		t.Fatalf("third connection: %v", err)
	}
	if !a.closed() {
		t.Fatal("a client that never answers PING was not closed")
	}
	st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
	if !strings.Contains(st, `"stale_closes": 2`) && !strings.Contains(st, `"stale_closes": 1`) {
		t.Fatalf("stale close not counted: %s", st)
	}
}
