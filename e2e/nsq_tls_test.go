package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
)

// TestNSQTLS: with nsq.tls (client certificates required and verified),
// go-nsq with TlsV1 and a certificate publishes and nsq_tail with the same
// options consumes; a client without a certificate and a plaintext one are
// refused with errors that say why and are counted; SIGHUP swaps the
// certificate without dropping a connected producer.
func TestNSQTLS(t *testing.T) {
	t.Parallel() // builds the NSQ tools while another test waits (see TestMain)
	tail := nsqTool(t, "nsq_tail")
	ca1, ca2 := newPKI(t, "one"), newPKI(t, "two")
	c1, k1 := ca1.valid("gw1", true)
	c2, k2 := ca2.valid("gw2", true)
	dir := t.TempDir()
	cert, key, clientCA := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "clients.pem")
	cp := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp(c1, cert)
	cp(k1, key)
	cp(ca1.CA, clientCA)
	n, addr := newNSQNode(t, fmt.Sprintf("groups:\n  - subject: telemetry.>\n    queue: tail\n"+
		"nsq:\n  tls: {cert_file: %s, key_file: %s, ca_file: %s, verify: true}\n", cert, key, clientCA))
	n.start()

	wc, wk := ca1.valid("worker", false)
	kp, err := tls.LoadX509KeyPair(wc, wk)
	if err != nil {
		t.Fatal(err)
	}
	producer := func(cfg *nsq.Config) *nsq.Producer {
		p, err := nsq.NewProducer(addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.SetLogger(nil, nsq.LogLevelError)
		t.Cleanup(p.Stop)
		return p
	}
	tlsCfg := func(tc *tls.Config) *nsq.Config {
		c := nsq.NewConfig()
		c.TlsV1, c.TlsConfig = true, tc
		return c
	}
	p := producer(tlsCfg(&tls.Config{RootCAs: ca1.pool, Certificates: []tls.Certificate{kp}}))
	const total = 20
	for i := range total {
		if err := p.Publish("telemetry", fmt.Appendf(nil, `{"device":"d%d","n":%d}`, i%3, i)); err != nil {
			t.Fatal("go-nsq over TLS with a client certificate:", err)
		}
	}

	tl := exec.Command(tail, "--nsqd-tcp-address", addr, "--topic", "telemetry", "--channel", "tail", "-n", fmt.Sprint(total),
		"--consumer-opt", "tls_v1,true", "--consumer-opt", "tls_root_ca_file,"+ca1.CA,
		"--consumer-opt", "tls_cert,"+wc, "--consumer-opt", "tls_key,"+wk)
	var tailOut, tailErr bytes.Buffer
	tl.Stdout, tl.Stderr = &tailOut, &tailErr
	if err := tl.Start(); err != nil {
		t.Fatal(err)
	}
	tailDone := make(chan error, 1)
	go func() { tailDone <- tl.Wait() }()
	select {
	case err := <-tailDone:
		if err != nil {
			t.Fatalf("nsq_tail over TLS: %v: %s", err, tailErr.String())
		}
	case <-time.After(60 * time.Second): // bounds a hang only
		tl.Process.Kill()
		t.Fatalf("nsq_tail over TLS did not get %d messages: %q; %s", total, tailOut.String(), tailErr.String())
	}
	if got := strings.Count(tailOut.String(), "\n"); got != total {
		t.Fatalf("nsq_tail: %d lines, want %d", got, total)
	}

	for _, c := range []struct {
		name string
		cfg  *nsq.Config
		want string
	}{
		{"no client certificate", tlsCfg(&tls.Config{RootCAs: ca1.pool}), "certificate required"},
		{"plaintext", nsq.NewConfig(), "TLS required"},
	} {
		bad, _ := nsq.NewProducer(addr, c.cfg)
		bad.SetLogger(nil, nsq.LogLevelError)
		err := bad.Publish("telemetry.d0", []byte("x"))
		bad.Stop()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	waitFor(t, "TLS failures counted", 10*time.Second, func() bool {
		return scrapeMetrics(t, n, "")["edgeq_nsq_tls_failures_total"] >= 2
	})

	// SIGHUP with a new server certificate (and client CA): the producer
	// connected before keeps working; new clients need the new CA.
	cp(c2, cert)
	cp(k2, key)
	cp(ca2.CA, clientCA)
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 10*time.Second, func() bool {
		return strings.Contains(n.logs(), "configuration reloaded") && strings.Contains(n.logs(), "nsq.tls")
	})
	if err := p.Publish("telemetry.d0", []byte("after reload")); err != nil {
		t.Fatal("a producer connected before the reload:", err)
	}
	nc, nk := ca2.valid("worker2", false)
	kp2, err := tls.LoadX509KeyPair(nc, nk)
	if err != nil {
		t.Fatal(err)
	}
	if err := producer(tlsCfg(&tls.Config{RootCAs: ca2.pool, Certificates: []tls.Certificate{kp2}})).Publish("telemetry.d0", []byte("new")); err != nil {
		t.Fatal("new certificates after the reload:", err)
	}
	if err := producer(tlsCfg(&tls.Config{RootCAs: ca1.pool, Certificates: []tls.Certificate{kp}})).Publish("telemetry.d0", []byte("old")); err == nil {
		t.Fatal("a client trusting only the old CA: accepted after the reload")
	}
}
