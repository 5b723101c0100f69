package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// pki is a test CA that issues certificates into a temporary directory.
type pki struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	CA   string // PEM file of the CA certificate
	pool *x509.CertPool
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &pki{t: t, dir: t.TempDir(), cert: cert, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(cert)
	p.CA = p.write(name+"-ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

var serial int64 = 100

// issue makes a server (127.0.0.1) or client certificate valid from
// notBefore to notAfter and returns its cert and key files.
func (p *pki) issue(name string, server bool, notBefore, notAfter time.Time) (certFile, keyFile string) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.write(name+".pem", "CERTIFICATE", der), p.write(name+"-key.pem", "PRIVATE KEY", kder)
}

func (p *pki) valid(name string, server bool) (string, string) {
	return p.issue(name, server, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func tlsURL(n *node) string { return fmt.Sprintf("tls://127.0.0.1:%d", n.natsPort) }

// TestNATSTLS: with nats.tls, INFO says tls_required and clients upgrade
// after it: nats.go with RootCAs and the nats CLI with --tlsca publish
// durably and receive; a plaintext client is told TLS is required; a
// client that does not trust the CA, and a server certificate that
// expired, are refused.
func TestNATSTLS(t *testing.T) {
	ca := newPKI(t, "plant")
	cert, key := ca.valid("gw", true)
	n := newNode(t, fmt.Sprintf("nats:\n  tls: {cert_file: %s, key_file: %s}\n", cert, key))
	n.start()

	nc, err := nats.Connect(tlsURL(n), nats.Secure(&tls.Config{RootCAs: ca.pool}))
	if err != nil {
		t.Fatalf("nats.go with RootCAs: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Fatal("the server did not say tls_required")
	}
	if st, err := nc.TLSConnectionState(); err != nil || st.Version < tls.VersionTLS12 {
		t.Fatalf("TLS state %v %v", st.Version, err)
	}
	sub, err := nc.SubscribeSync("telemetry.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if m, err := nc.Request("telemetry.dev-1", []byte("over tls"), 5*time.Second); err != nil || !strings.Contains(string(m.Data), `"offset"`) {
		t.Fatalf("durable publish over TLS: %v %v", m, err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "over tls" {
		t.Fatalf("tail over TLS: %v %v", m, err)
	}

	natsCLI := requireTool(t, "nats")
	if out, err := runCmd(natsCLI, "--server", tlsURL(n), "--tlsca", ca.CA, "pub", "telemetry.dev-2", "from the cli"); err != nil {
		t.Fatalf("nats CLI with --tlsca: %v %s", err, out)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "from the cli" {
		t.Fatalf("CLI message: %v %v", m, err)
	}
	if out, err := runCmd(edgeqBin, "pub", "--server", tlsURL(n), "--tlsca", ca.CA, "dev-4", "from edgeq pub"); err != nil {
		t.Fatalf("edgeq pub --tlsca: %v %s", err, out)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "from edgeq pub" {
		t.Fatalf("edgeq pub message: %v %v", m, err)
	}
	if out, err := runCmd(natsCLI, "--server", tlsURL(n), "pub", "telemetry.dev-2", "x"); err == nil {
		t.Fatalf("nats CLI without the CA connected: %s", out)
	}

	// A plaintext client reads INFO, then is told TLS is required.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.natsPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	info, _ := r.ReadString('\n')
	if !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("INFO: %q", info)
	}
	fmt.Fprintf(c, "CONNECT {}\r\nPUB telemetry.dev-3 2\r\nhi\r\nPING\r\n")
	if line, _ := r.ReadString('\n'); !strings.Contains(line, "Secure Connection - TLS Required") {
		t.Fatalf("plaintext client got %q", line)
	}

	other := newPKI(t, "other")
	if _, err := nats.Connect(tlsURL(n), nats.Secure(&tls.Config{RootCAs: other.pool}), nats.NoReconnect()); err == nil {
		t.Fatal("a client trusting another CA connected")
	}
	if _, err := nats.Connect(n.url(), nats.NoReconnect()); err == nil {
		t.Fatal("a client without a CA connected")
	}
	waitFor(t, "TLS refusals counted", 10*time.Second, func() bool {
		return scrapeMetrics(t, n, "")[`edgeq_nats_closed_connections_total{reason="tls_handshake"}`] >= 3
	})

	// An expired server certificate is refused by the client.
	ecert, ekey := ca.issue("gw-expired", true, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	exp := newNode(t, fmt.Sprintf("nats:\n  tls: {cert_file: %s, key_file: %s}\n", ecert, ekey))
	exp.start()
	if _, err := nats.Connect(tlsURL(exp), nats.Secure(&tls.Config{RootCAs: ca.pool}), nats.NoReconnect()); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired server certificate: %v", err)
	}
}

// TestNATSTLSClientCertificates: with verify, a client needs a certificate
// of the configured CA: one without, one expired and one of another CA are
// refused; a valid one works, with handshake first and after INFO alike.
func TestNATSTLSClientCertificates(t *testing.T) {
	ca := newPKI(t, "plant")
	cert, key := ca.valid("gw", true)
	n := newNode(t, fmt.Sprintf("nats:\n  tls: {cert_file: %s, key_file: %s, ca_file: %s, verify: true, handshake_first: true, handshake_first_fallback: 200ms}\n", cert, key, ca.CA))
	n.start()
	clientTLS := func(certFile, keyFile string) *tls.Config {
		c := &tls.Config{RootCAs: ca.pool}
		if certFile != "" {
			kp, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			c.Certificates = []tls.Certificate{kp}
		}
		return c
	}
	cc, ck := ca.valid("worker", false)
	for _, first := range []bool{false, true} {
		opts := []nats.Option{nats.Secure(clientTLS(cc, ck)), nats.NoReconnect()}
		if first {
			opts = append(opts, nats.TLSHandshakeFirst())
		}
		nc, err := nats.Connect(tlsURL(n), opts...)
		if err != nil {
			t.Fatalf("client certificate (handshake first %v): %v", first, err)
		}
		if _, err := nc.Request("telemetry.dev-1", []byte("x"), 5*time.Second); err != nil {
			t.Fatalf("publish (handshake first %v): %v", first, err)
		}
		nc.Close()
	}
	xc, xk := ca.issue("worker-expired", false, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	other := newPKI(t, "other")
	oc, ok := other.valid("intruder", false)
	for name, cfg := range map[string]*tls.Config{
		"no client certificate": clientTLS("", ""),
		"expired":               clientTLS(xc, xk),
		"another CA":            clientTLS(oc, ok),
	} {
		nc, err := nats.Connect(tlsURL(n), nats.Secure(cfg), nats.NoReconnect())
		if err == nil {
			// TLS 1.3: the client learns of a refused certificate on its first read.
			_, err = nc.Request("telemetry.dev-1", []byte("x"), 2*time.Second)
			nc.Close()
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if out, err := runCmd(requireTool(t, "nats"), "--server", tlsURL(n), "--tlsca", ca.CA, "--tlscert", cc, "--tlskey", ck, "--tlsfirst", "pub", "telemetry.dev-2", "x"); err != nil {
		t.Fatalf("nats CLI with a client certificate, TLS first: %v %s", err, out)
	}
}

// TestHTTPS: with http.tls, curl with the CA gets /healthz and /metrics;
// plain HTTP and curl without the CA get nothing.
func TestHTTPS(t *testing.T) {
	ca := newPKI(t, "plant")
	cert, key := ca.valid("gw", true)
	n := newNode(t, fmt.Sprintf("http:\n  tls: {cert_file: %s, key_file: %s}\n", cert, key))
	n.https = true
	n.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}, Timeout: 10 * time.Second}
	n.start()
	curl := requireTool(t, "curl")
	if out, err := runCmd(curl, "-sS", "--fail", "--cacert", ca.CA, n.httpURL()+"/healthz"); err != nil {
		t.Fatalf("curl over HTTPS with the CA: %v %s", err, out)
	}
	if out, err := runCmd(curl, "-sS", "--fail", "--cacert", ca.CA, n.httpURL()+"/metrics"); err != nil || !strings.Contains(out, "edgeq_nats_connections") {
		t.Fatalf("curl /metrics: %v %.200s", err, out)
	}
	if out, err := runCmd(edgeqBin, "status", "--http", n.httpURL(), "--tlsca", ca.CA); err != nil {
		t.Fatalf("edgeq status over HTTPS: %v %s", err, out)
	}
	if out, err := runCmd(curl, "-sS", "--fail", n.httpURL()+"/healthz"); err == nil {
		t.Fatalf("curl without the CA: %s", out)
	}
	if out, err := runCmd(curl, "-sS", "--fail", fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort)); err == nil {
		t.Fatalf("plain HTTP answered: %s", out)
	}
}

// TestHTTPSClientCertificates: with http.tls.verify, curl with a client
// certificate of the configured CA gets the API; curl without one, with an
// expired one or with one of another CA gets nothing.
func TestHTTPSClientCertificates(t *testing.T) {
	ca := newPKI(t, "plant")
	cert, key := ca.valid("gw", true)
	cc, ck := ca.valid("operator", false)
	n := newNode(t, fmt.Sprintf("http:\n  token: an-http-token-of-16+\n  tls: {cert_file: %s, key_file: %s, ca_file: %s, verify: true}\n", cert, key, ca.CA))
	n.https = true
	kp, err := tls.LoadX509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	n.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{kp}}}, Timeout: 10 * time.Second}
	n.start()
	curl := requireTool(t, "curl")
	bearer := "Authorization: Bearer an-http-token-of-16+"
	if out, err := runCmd(curl, "-sS", "--fail", "--cacert", ca.CA, "--cert", cc, "--key", ck, "-H", bearer, n.httpURL()+"/v1/status"); err != nil || !strings.Contains(out, `"node"`) {
		t.Fatalf("curl with a client certificate: %v %.300s", err, out)
	}
	if out, err := runCmd(curl, "-sS", "--cacert", ca.CA, "--cert", cc, "--key", ck, "-o", "/dev/null", "-w", "%{http_code}", n.httpURL()+"/v1/status"); err != nil || out != "401" {
		t.Fatalf("curl with a certificate but no token: %v %q, want 401", err, out)
	}
	xc, xk := ca.issue("operator-expired", false, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	oc, ok := newPKI(t, "other").valid("intruder", false)
	for name, args := range map[string][]string{
		"no client certificate": nil,
		"expired":               {"--cert", xc, "--key", xk},
		"another CA":            {"--cert", oc, "--key", ok},
	} {
		cmd := append([]string{"-sS", "--fail", "--cacert", ca.CA, "-H", bearer}, args...)
		if out, err := runCmd(curl, append(cmd, n.httpURL()+"/healthz")...); err == nil {
			t.Errorf("%s: curl got an answer: %.200s", name, out)
		}
	}
}

// TestPlaintextBeyondLoopbackRefused: a node listening beyond loopback
// without TLS does not start, and says which key allows it.
func TestPlaintextBeyondLoopbackRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(cfg, []byte("nats:\n  auth_token: a-token-of-16-chars-or-more\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(edgeqBin, "run", "--config", cfg, "--data", t.TempDir(), "--nats", "0.0.0.0:0", "--http", "")
	if err == nil || !strings.Contains(out, "nats.allow_plaintext") {
		t.Fatalf("plaintext beyond loopback: %v %s", err, out)
	}
}

// TestSIGHUPReload: SIGHUP swaps the NATS certificate and the users without
// dropping a connected client; new clients need the new CA and password.
// A config that does not load, or a certificate file that does not parse,
// keeps everything in use, and the node keeps running.
func TestSIGHUPReload(t *testing.T) {
	ca1, ca2 := newPKI(t, "one"), newPKI(t, "two")
	c1, k1 := ca1.valid("gw1", true)
	c2, k2 := ca2.valid("gw2", true)
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
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
	conf := func(pass string) string {
		return fmt.Sprintf("nats:\n  users: [{user: w, password: %s}]\n  tls: {cert_file: %s, key_file: %s}\n", pass, cert, key)
	}
	n := newNode(t, conf("old-password"))
	n.start()
	connect := func(pool *x509.CertPool, pass string) (*nats.Conn, error) {
		return nats.Connect(tlsURL(n), nats.Secure(&tls.Config{RootCAs: pool}), nats.UserInfo("w", pass), nats.NoReconnect())
	}
	before, err := connect(ca1.pool, "old-password")
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	cp(c2, cert)
	cp(k2, key)
	if err := os.WriteFile(n.config, []byte(conf("new-password")), 0o600); err != nil {
		t.Fatal(err)
	}
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "reload logged", 10*time.Second, func() bool { return strings.Contains(n.logs(), "configuration reloaded") })
	if _, err := before.Request("telemetry.dev-1", []byte("x"), 5*time.Second); err != nil || !before.IsConnected() {
		t.Fatalf("a client connected before the reload: %v", err)
	}
	if nc, err := connect(ca2.pool, "new-password"); err != nil {
		t.Fatalf("new certificate and password: %v", err)
	} else {
		nc.Close()
	}
	for name, c := range map[string]struct {
		pool *x509.CertPool
		pass string
	}{"old CA": {ca1.pool, "new-password"}, "old password": {ca2.pool, "old-password"}} {
		if nc, err := connect(c.pool, c.pass); err == nil {
			nc.Close()
			t.Fatalf("%s still accepted after the reload", name)
		}
	}
	// A broken config, then a broken key: refused, the node runs on as it was.
	for i, broken := range []func(){
		func() { os.WriteFile(n.config, []byte("nats: [not, a, map"), 0o600) },
		func() {
			os.WriteFile(n.config, []byte(conf("third-password")), 0o600)
			os.WriteFile(key, []byte("garbage"), 0o600)
		},
	} {
		broken()
		n.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, "reload refused", 10*time.Second, func() bool { return strings.Count(n.logs(), "reload refused") == i+1 })
		if !n.running() {
			t.Fatal("a bad reload stopped the node")
		}
		if nc, err := connect(ca2.pool, "new-password"); err != nil {
			t.Fatalf("after a refused reload %d: %v", i, err)
		} else {
			nc.Close()
		}
	}
	if _, err := before.Request("telemetry.dev-1", []byte("y"), 5*time.Second); err != nil {
		t.Fatalf("the first client after the refused reloads: %v", err)
	}
}
