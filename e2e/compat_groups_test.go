package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Rows of TestClientCompat for the group lifecycle and nsqd's HTTP API.
func compatGroupRows() []compatRow {
	return []compatRow{
		{"curl", "`GET /v1/groups` lists core NATS, NSQ and JetStream groups", "works", curlListGroups},
		{"curl", "`DELETE /v1/groups/{name}` of a group with a member", "refused", curlDeleteBusy},
		{"curl", "`DELETE /v1/groups/{name}` of a group without members", "works", curlDeleteIdle},
		{"natscli", "`nats consumer ls TELEMETRY` shows core queue groups and NSQ channels", "works", cliConsumerLsGroups},
		{"natscli", "`nats consumer rm TELEMETRY <queue group>`", "works", cliConsumerRmGroup},
		{"curl", "nsqd `POST /pub?topic=telemetry.<device>`", "works", curlNSQPub},
		{"curl", "nsqd `POST /mpub` (newlines, and `binary=true`)", "works", curlNSQMPub},
		{"curl", "nsqd `POST /pub?defer=` (deferred message)", "refused", curlNSQDefer},
		{"curl", "nsqd `POST /channel/delete` of a channel without consumers", "works", curlChannelDelete},
		{"nsq tools", "`to_nsq` publishes stdin", "works", toolToNSQ},
		{"nsq tools", "`nsq_to_file --lookupd-http-address`", "works", toolToFile},
		{"nsq tools", "`nsq_stat --nsqd-http-address` (`/stats?format=json`)", "works", toolStat},
	}
}

// queueMember subscribes a core NATS queue member of q and waits until the
// node counts it.
func queueMember(t *testing.T, e *compatEnv, q string) *nats.Subscription {
	nc, err := nats.Connect(e.n.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sub, err := nc.QueueSubscribeSync("telemetry.>", q)
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	waitMembers(t, e.n, q, 1)
	return sub
}

func curlCode(t *testing.T, e *compatEnv, args ...string) (string, string) {
	out, err := runCmd(e.curl, append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...)
	if err != nil {
		t.Fatalf("curl %v: %v %s", args, err, out)
	}
	i := strings.LastIndexByte(out, '\n')
	return out[i+1:], out[:i]
}

func curlListGroups(t *testing.T, e *compatEnv) compatOutcome {
	queueMember(t, e, "listed")
	code, body := curlCode(t, e, e.n.httpURL()+"/v1/groups")
	var ans struct {
		Groups []groupEntry `json:"groups"`
	}
	if err := json.Unmarshal([]byte(body), &ans); code != "200" || err != nil {
		return broken("%s %v: %s", code, err, body)
	}
	kinds := map[string]bool{}
	for _, g := range ans.Groups {
		if g.Name == "listed" && membersOf(g) == 1 {
			kinds["core"] = true
		}
		if g.NSQChannel && g.Name == "compat" {
			kinds["nsq"] = true
		}
		kinds[g.Kind] = true
	}
	if !kinds["core"] || !kinds["nsq"] || !kinds["jetstream"] {
		return broken("kinds listed: %v", kinds)
	}
	return compatOutcome{status: "works", note: "name, subject, kind, members by node, leader, expiry (`edgeq groups ls` prints it)"}
}

func curlDeleteBusy(t *testing.T, e *compatEnv) compatOutcome {
	queueMember(t, e, "busy")
	code, body := curlCode(t, e, "-X", "DELETE", e.n.httpURL()+"/v1/groups/busy")
	if code != "409" || !strings.Contains(body, "stop its workers first") {
		return broken("%s %s", code, body)
	}
	return refused("409 naming the members by node: stop the workers first (their subscriptions would stay, getting nothing)")
}

func curlDeleteIdle(t *testing.T, e *compatEnv) compatOutcome {
	sub := queueMember(t, e, "idle")
	sub.Unsubscribe()
	waitFor(t, "idle without members", time.Minute, func() bool {
		g, ok := listGroups(t, e.n, "")["idle"]
		return ok && membersOf(g) == 0
	})
	code, body := curlCode(t, e, "-X", "DELETE", e.n.httpURL()+"/v1/groups/idle")
	if _, still := listGroups(t, e.n, "")["idle"]; code != "200" || still {
		return broken("%s %s (still listed: %v)", code, body, still)
	}
	return works()
}

func cliConsumerLsGroups(t *testing.T, e *compatEnv) compatOutcome {
	queueMember(t, e, "lsgroup")
	out, err := e.cli("consumer", "ls", "TELEMETRY", "--names")
	if err != nil || !strings.Contains(out, "lsgroup") || !strings.Contains(out, "compat") {
		return broken("%v: %s", err, out)
	}
	return compatOutcome{status: "works", note: "named by their queue (channel); `consumer info` says \"edgeq queue group\""}
}

func cliConsumerRmGroup(t *testing.T, e *compatEnv) compatOutcome {
	sub := queueMember(t, e, "rmgroup")
	if out, err := e.cli("consumer", "rm", "TELEMETRY", "rmgroup", "-f"); err == nil {
		return broken("removed with a member: %s", out)
	}
	sub.Unsubscribe()
	waitFor(t, "rmgroup without members", time.Minute, func() bool { return membersOf(listGroups(t, e.n, "")["rmgroup"]) == 0 })
	if out, err := e.cli("consumer", "rm", "TELEMETRY", "rmgroup", "-f"); err != nil {
		return broken("%v: %s", err, out)
	}
	return compatOutcome{status: "works", note: "refused (10003) while it has members"}
}

func curlNSQPub(t *testing.T, e *compatEnv) compatOutcome {
	code, body := curlCode(t, e, "--data-binary", `{"t":1}`, e.n.httpURL()+"/pub?topic=telemetry.nsqhttp-1")
	if code != "200" || body != "OK" {
		return broken("%s %s", code, body)
	}
	return works()
}

func curlNSQMPub(t *testing.T, e *compatEnv) compatOutcome {
	code, body := curlCode(t, e, "--data-binary", "{\"device\":\"m-1\"}\n{\"device\":\"m-2\"}\n", e.n.httpURL()+"/mpub?topic=telemetry")
	if code != "200" || body != "OK" {
		return broken("newlines: %s %s", code, body)
	}
	bin := filepath.Join(t.TempDir(), "mpub.bin")
	if err := os.WriteFile(bin, binaryMPUB("a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = curlCode(t, e, "--data-binary", "@"+bin, e.n.httpURL()+"/mpub?topic=telemetry.m-3&binary=true")
	if code != "200" || body != "OK" {
		return broken("binary: %s %s", code, body)
	}
	return compatOutcome{status: "works", note: "`OK` once every message is durable; one without a device ID refuses the batch (400)"}
}

func curlNSQDefer(t *testing.T, e *compatEnv) compatOutcome {
	code, body := curlCode(t, e, "--data-binary", "x", e.n.httpURL()+"/pub?topic=telemetry.d-1&defer=1000")
	if code != "400" || !strings.Contains(body, `"message":"INVALID_DEFER`) {
		return broken("%s %s", code, body)
	}
	return refused("400 `INVALID_DEFER`, nsqd's shape: a deferred message would hold back the rest of its device")
}

func toolToNSQ(t *testing.T, e *compatEnv) compatOutcome {
	cmd := exec.Command(nsqTool(t, "to_nsq"), "--nsqd-tcp-address", e.nsqAddr, "--topic", "telemetry.tonsq-1")
	cmd.Stdin = strings.NewReader("a\nb\nc\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return broken("%v: %s", err, out)
	}
	return works()
}

func toolToFile(t *testing.T, e *compatEnv) compatOutcome {
	queueMember(t, e, "tofile").Unsubscribe() // the channel exists (deliver: new) before the messages
	outDir, workDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(nsqTool(t, "nsq_to_file"), "--lookupd-http-address", fmt.Sprintf("127.0.0.1:%d", e.n.httpPort),
		"--topic", "telemetry", "--channel", "tofile", "--output-dir", outDir, "--work-dir", workDir, "--sync-interval", "100ms")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitMembers(t, e.n, "tofile", 1)
	for i := range 3 {
		if code, body := curlCode(t, e, "--data-binary", "x", e.n.httpURL()+fmt.Sprintf("/pub?topic=telemetry.tofile-%d", i)); code != "200" {
			return broken("publish: %s %s", code, body)
		}
	}
	waitFor(t, "nsq_to_file to finish", time.Minute, func() bool { return e.n.groupLag(t, "tofile") == 0 })
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	files, _ := filepath.Glob(filepath.Join(outDir, "*"))
	lines := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines += bytes.Count(b, []byte("\n"))
	}
	if lines != 3 {
		return broken("%d lines written: %s", lines, log.String())
	}
	return works()
}

func toolStat(t *testing.T, e *compatEnv) compatOutcome {
	out, err := runCmd(nsqTool(t, "nsq_stat"), "--nsqd-http-address", fmt.Sprintf("127.0.0.1:%d", e.n.httpPort),
		"--topic", "telemetry", "--channel", "compat", "--interval", "100ms", "--count", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(strings.Fields(lines[len(lines)-1])) != 13 {
		return broken("%v: %s", err, lastLine(out))
	}
	return compatOutcome{status: "works", note: "depth is the channel's lag (all of it on disk: `disk`), `def` always 0"}
}

func curlChannelDelete(t *testing.T, e *compatEnv) compatOutcome {
	queueMember(t, e, "chdel").Unsubscribe()
	waitFor(t, "chdel without members", time.Minute, func() bool { return membersOf(listGroups(t, e.n, "")["chdel"]) == 0 })
	code, body := curlCode(t, e, "-X", "POST", e.n.httpURL()+"/channel/delete?topic=telemetry&channel=chdel")
	if _, still := listGroups(t, e.n, "")["chdel"]; code != "200" || still {
		return broken("%s %s (still listed: %v)", code, body, still)
	}
	return compatOutcome{status: "works", note: "as `edgeq groups rm`: 409 `CHANNEL_IN_USE` with the reason for a channel with consumers"}
}
