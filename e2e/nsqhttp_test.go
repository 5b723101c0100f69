package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// nsqHTTP sends a request to the node's HTTP port (nsqd's API, the groups
// API) with the token, if any; it returns the status and the body.
func nsqHTTP(t testing.TB, n *node, method, path, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, n.httpURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// binaryMPUB is nsqd's binary MPUB body.
func binaryMPUB(msgs ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(msgs)))
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return b
}

// TestNSQHTTPTools: nsqd's HTTP API on the node's HTTP port — /pub, /mpub
// (newline and binary), /info, /stats, /channel/delete — with nsqd's
// refusals; to_nsq
// publishes, nsq_to_file (found through --lookupd-http-address) consumes
// everything, and nsq_stat reads the channel's figures; with nsq.auth_token
// set, publishing and stats need it.
func TestNSQHTTPTools(t *testing.T) {
	t.Parallel() // may build the NSQ tools while another test waits (see TestMain)
	toNSQ, toFile, stat := nsqTool(t, "to_nsq"), nsqTool(t, "nsq_to_file"), nsqTool(t, "nsq_stat")
	n, addr := newNSQNode(t, "groups:\n  - subject: telemetry.>\n    queue: archive\n", "EDGEQ_NSQ_MAX_MSG_SIZE=1KiB")
	n.start()

	for _, tc := range []struct {
		path, body string
		binary     bool
	}{
		{"/pub?topic=telemetry.dev-a", `{"device":"dev-a","n":1}`, false},
		{"/mpub?topic=telemetry.dev-b", "{\"device\":\"dev-b\",\"n\":1}\n{\"device\":\"dev-b\",\"n\":2}\n", false},
		{"/mpub?topic=telemetry&binary=true", "", true},
	} {
		body := []byte(tc.body)
		if tc.binary {
			body = binaryMPUB(`{"device":"dev-c","n":1}`, `{"device":"dev-c","n":2}`)
		}
		if code, out := nsqHTTP(t, n, "POST", tc.path, "", body); code != 200 || out != "OK" {
			t.Fatalf("POST %s: %d %q", tc.path, code, out)
		}
	}
	for _, tc := range []struct {
		path, body string
		code       int
		message    string
	}{
		{"/pub", "x", 400, "MISSING_ARG_TOPIC"},
		{"/pub?topic=bad!", "x", 400, "INVALID_TOPIC"},
		{"/pub?topic=other", "x", 400, "INVALID_TOPIC: topic \"other\" is not served"},
		{"/pub?topic=telemetry", `{"n":1}`, 400, "BAD_MESSAGE: no device ID"},
		{"/pub?topic=telemetry.dev-a&defer=1000", "x", 400, "INVALID_DEFER"},
		{"/pub?topic=telemetry.dev-a", "", 400, "MSG_EMPTY"},
		{"/pub?topic=telemetry.dev-a", strings.Repeat("x", 2000), 413, "MSG_TOO_BIG"},
		{"/mpub?topic=telemetry", "{\"device\":\"dev-e\"}\n{\"n\":2}\n", 400, "BAD_MESSAGE: message 1: no device ID"},
		{"/mpub?topic=telemetry&binary=true", "\x00\x00", 413, "BAD_BODY"},
	} {
		code, out := nsqHTTP(t, n, "POST", tc.path, "", []byte(tc.body))
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(out), &e); code != tc.code || !strings.HasPrefix(e.Message, tc.message) {
			t.Fatalf("POST %s: %d %s, want %d with message %q", tc.path, code, out, tc.code, tc.message)
		}
	}

	// to_nsq over TCP: five messages from stdin.
	var in bytes.Buffer
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&in, "{\"device\":\"dev-d\",\"n\":%d}\n", i)
	}
	tn := exec.Command(toNSQ, "--nsqd-tcp-address", addr, "--topic", "telemetry")
	tn.Stdin = &in
	if out, err := tn.CombinedOutput(); err != nil {
		t.Fatalf("to_nsq: %v %s", err, out)
	}
	const total = 10

	var info struct {
		TCPPort  int    `json:"tcp_port"`
		HTTPPort int    `json:"http_port"`
		Version  string `json:"version"`
	}
	code, out := nsqHTTP(t, n, "GET", "/info", "", nil)
	if err := json.Unmarshal([]byte(out), &info); code != 200 || err != nil || info.HTTPPort != n.httpPort || strconv.Itoa(info.TCPPort) != addr[strings.LastIndexByte(addr, ':')+1:] {
		t.Fatalf("/info: %d %v %s", code, err, out)
	}

	// nsq_to_file finds the node through the lookupd endpoint.
	hostPort := fmt.Sprintf("127.0.0.1:%d", n.httpPort)
	outDir, workDir := t.TempDir(), t.TempDir()
	tf := exec.Command(toFile, "--lookupd-http-address", hostPort, "--topic", "telemetry", "--channel", "archive",
		"--output-dir", outDir, "--work-dir", workDir, "--sync-interval", "200ms", "--log-level", "warn")
	var tfLog bytes.Buffer
	tf.Stdout, tf.Stderr = &tfLog, &tfLog
	if err := tf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tf.Process.Kill(); tf.Wait() })
	waitFor(t, "nsq_to_file to finish the backlog", time.Minute, func() bool { return n.groupLag(t, "archive") == 0 })

	// nsq_stat reads /stats through --nsqd-http-address: two reports, the
	// second printed (the first is its baseline).
	st, err := runCmd(stat, "--nsqd-http-address", hostPort, "--topic", "telemetry", "--channel", "archive",
		"--interval", "200ms", "--count", "1")
	if err != nil {
		t.Fatalf("nsq_stat: %v %s", err, st)
	}
	lines := strings.Split(strings.TrimSpace(st), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	// ingress egress | total mem disk inflt def | req t-o msgs clients
	if len(fields) != 13 || fields[3] != "0" || fields[11] != strconv.Itoa(total) || fields[12] != "1" {
		t.Fatalf("nsq_stat: want depth 0, msgs %d, 1 client:\n%s", total, st)
	}
	code, out = nsqHTTP(t, n, "GET", "/stats", "", nil)
	if code != 200 || !strings.Contains(out, "[archive") {
		t.Fatalf("/stats (text): %d %s", code, out)
	}

	tf.Process.Signal(syscall.SIGTERM) // rotates the file into output-dir
	tf.Wait()
	files, _ := filepath.Glob(filepath.Join(outDir, "*"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if c := bytes.Count(all, []byte("\n")); c != total {
		t.Fatalf("nsq_to_file wrote %d lines, want %d: %s; its log: %s", c, total, all, tfLog.String())
	}

	// /channel/delete deletes a channel as `edgeq groups rm` does.
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.QueueSubscribeSync("telemetry.>", "tmpch")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	waitMembers(t, n, "tmpch", 1)
	sub.Unsubscribe()
	nc.Flush()
	waitFor(t, "tmpch without members", time.Minute, func() bool { return membersOf(listGroups(t, n, "")["tmpch"]) == 0 })
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"topic=telemetry&channel=tmpch", 200, ""},
		{"topic=telemetry&channel=tmpch", 404, `"CHANNEL_NOT_FOUND"`},
		{"topic=telemetry&channel=archive", 409, "groups[0]"},
		{"topic=telemetry", 400, `"MISSING_ARG_CHANNEL"`},
	} {
		if code, out := nsqHTTP(t, n, "POST", "/channel/delete?"+tc.query, "", nil); code != tc.code || !strings.Contains(out, tc.want) {
			t.Fatalf("/channel/delete?%s: %d %s, want %d %s", tc.query, code, out, tc.code, tc.want)
		}
	}

	// With nsq.auth_token, the HTTP API wants it as a bearer token.
	const token = "nsq-http-t0ken-1234"
	an, _ := newNSQNode(t, "nsq:\n  auth_token: "+token+"\n")
	an.start()
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{"POST", "/pub?topic=telemetry.dev-a", "", 401},
		{"POST", "/pub?topic=telemetry.dev-a", "wrong", 401},
		{"GET", "/stats?format=json", "", 401},
		{"POST", "/pub?topic=telemetry.dev-a", token, 200},
		{"GET", "/stats?format=json", token, 200},
	} {
		if code, out := nsqHTTP(t, an, tc.method, tc.path, tc.token, []byte("x")); code != tc.want {
			t.Fatalf("%s %s with token %q: %d %s, want %d", tc.method, tc.path, tc.token, code, out, tc.want)
		}
	}
}
