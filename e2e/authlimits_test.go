package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"
)

// TestBcryptPasswords: a user whose password in the config is a bcrypt
// hash (as nats-server takes them) connects with the password, not with
// the hash or a wrong one.
func TestBcryptPasswords(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("worker-password"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, fmt.Sprintf("nats:\n  users:\n    - {user: worker, password: '%s'}\n    - {user: plain, password: plain-password}\n", hash))
	n.start()
	nc, err := nats.Connect(n.url(), nats.UserInfo("worker", "worker-password"))
	if err != nil {
		t.Fatalf("bcrypt user: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(n.url(), nats.UserInfo("plain", "plain-password")); err != nil {
		t.Fatalf("plain user: %v", err)
	} else {
		nc.Close()
	}
	for _, pass := range []string{string(hash), "wrong", ""} {
		if nc, err := nats.Connect(n.url(), nats.UserInfo("worker", pass), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Fatalf("password %q accepted", pass)
		}
	}
}

// TestQueueGroupsPerConnection: one connection creates at most
// max_groups_per_connection queue groups; the next subscribe is refused
// with a Permissions Violation (nats.go keeps the connection), joining a
// group that exists is not limited, and the refusal is counted.
func TestQueueGroupsPerConnection(t *testing.T) {
	n := newNode(t, "nats:\n  max_groups_per_connection: 3\n")
	n.start()
	mu, asyncErrs := new(sync.Mutex), new([]string)
	nc, err := nats.Connect(n.url(), collectErrors(mu, asyncErrs))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := 1; i <= 4; i++ {
		if _, err := nc.QueueSubscribeSync("telemetry.>", fmt.Sprint("q", i)); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	waitFor(t, "the fourth group refused", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(*asyncErrs) == 1
	})
	mu.Lock()
	if !strings.Contains(strings.ToLower((*asyncErrs)[0]), "permissions violation") || !strings.Contains((*asyncErrs)[0], "max_groups_per_connection") {
		t.Fatalf("error %q", (*asyncErrs)[0])
	}
	mu.Unlock()
	if !nc.IsConnected() {
		t.Fatal("the refusal closed the connection")
	}
	other, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.QueueSubscribeSync("telemetry.>", "q5"); err != nil {
		t.Fatal(err)
	}
	other.Flush()
	time.Sleep(200 * time.Millisecond)
	sub, err := nc.QueueSubscribeSync("telemetry.>", "q5") // exists: joining is free
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("telemetry.dev-1", []byte("x"), 5*time.Second); err != nil {
		t.Fatalf("publish after the refusal: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	if len(*asyncErrs) != 1 {
		t.Fatalf("joining an existing group refused: %v", *asyncErrs)
	}
	mu.Unlock()
	_ = sub
	if v := scrapeMetrics(t, n, "")["edgeq_nats_refused_group_creations_total"]; v != 1 {
		t.Fatalf("refusals counted: %v", v)
	}
}

// TestUserPermissions: a user limited to publishing telemetry and
// subscribing to its inbox and one queue group gets Permissions Violation
// (connection kept) for anything else, and the refusals are counted; an
// unrestricted user on the same node is not limited.
func TestUserPermissions(t *testing.T) {
	n := newNode(t, "nats:\n  users:\n"+
		"    - user: sensor\n      password: sensor-password\n      permissions:\n"+
		"        publish: {allow: [telemetry.>], deny: [telemetry.admin]}\n"+
		"        subscribe: {allow: ['_INBOX.>'], deny: []}\n"+
		"    - {user: admin, password: admin-password}\n")
	n.start()
	mu, errsp := new(sync.Mutex), new([]string)
	nc, err := nats.Connect(n.url(), nats.UserInfo("sensor", "sensor-password"), collectErrors(mu, errsp))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("telemetry.dev-1", []byte("x"), 5*time.Second); err != nil {
		t.Fatalf("allowed publish with a reply inbox: %v", err)
	}
	_ = nc.Publish("telemetry.admin", []byte("x"))
	_ = nc.Publish("other.subject", []byte("x"))
	_, _ = nc.QueueSubscribeSync("telemetry.>", "steal")
	nc.Flush()
	waitFor(t, "three refusals", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(*errsp) == 3
	})
	mu.Lock()
	for _, e := range *errsp {
		if !strings.Contains(strings.ToLower(e), "permissions violation") {
			t.Errorf("error %q", e)
		}
	}
	mu.Unlock()
	if !nc.IsConnected() {
		t.Fatal("a refusal closed the connection")
	}
	admin, err := nats.Connect(n.url(), nats.UserInfo("admin", "admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.QueueSubscribeSync("telemetry.>", "q"); err != nil {
		t.Fatal(err)
	}
	if err := admin.Publish("other.subject", []byte("x")); err != nil || admin.Flush() != nil || admin.LastError() != nil {
		t.Fatalf("unrestricted user: %v %v", err, admin.LastError())
	}
	if v := scrapeMetrics(t, n, "")["edgeq_nats_permission_violations_total"]; v != 3 {
		t.Fatalf("violations counted: %v", v)
	}
}

// collectErrors keeps the asynchronous errors (-ERR) nats.go reports.
func collectErrors(mu *sync.Mutex, errs *[]string) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		*errs = append(*errs, err.Error())
		mu.Unlock()
	})
}
