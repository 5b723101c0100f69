package nsqserver

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"

	"edgeq/gateway/tlsconf"
)

// testCA issues certificates into a temporary directory.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	file string // PEM of the CA certificate
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key, pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	ca.file = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(name, typ string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue makes a server certificate for 127.0.0.1, or a client certificate.
func (ca *testCA) issue(name string, server bool) (certFile, keyFile string) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return ca.write(name+".pem", "CERTIFICATE", der), ca.write(name+"-key.pem", "EC PRIVATE KEY", kder)
}

// clientTLS trusts ca and, with certFile, presents that certificate.
func (ca *testCA) clientTLS(certFile, keyFile string) *tls.Config {
	c := &tls.Config{RootCAs: ca.pool}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			ca.t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

// tlsRig is a server whose listener requires TLS with the given client
// certificate policy.
func tlsRig(t *testing.T, ca *testCA, verify bool) (*rig, *tlsconf.Store) {
	t.Helper()
	cert, key := ca.issue("gw", true)
	f := tlsconf.Files{CertFile: cert, KeyFile: key}
	if verify {
		f.CAFile, f.Verify = ca.file, true
	}
	store, err := tlsconf.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return newRig(t, func(c *Config) { c.TLS = store }), store
}

// forceCert presents the certificate even when the server's CA list does
// not name its issuer (Go's client would otherwise send none).
func forceCert(c *tls.Config) *tls.Config {
	cert := c.Certificates[0]
	c.Certificates = nil
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return c
}

func tlsNSQConfig(tc *tls.Config) *nsq.Config {
	c := nsqConfig()
	c.TlsV1 = true
	c.TlsConfig = tc
	return c
}

// TestTLSByteSequence: nsqd's order on the wire — the IDENTIFY response
// in plaintext with tls_v1: true, the handshake on the same connection,
// then OK as the first frame over TLS; commands work over TLS after it.
func TestTLSByteSequence(t *testing.T) {
	ca := newTestCA(t, "plant")
	r, _ := tlsRig(t, ca, false)
	c := dialRaw(t, r)
	c.send("IDENTIFY", []byte(`{"feature_negotiation":true,"tls_v1":true,"heartbeat_interval":2000}`))
	data := c.expect(FrameResponse, "{")
	var id identifyResponse
	if err := json.Unmarshal(data, &id); err != nil || !id.TLSv1 {
		t.Fatalf("IDENTIFY response: %s %v", data, err)
	}
	if n := c.br.Buffered(); n != 0 {
		t.Fatalf("%d bytes after the IDENTIFY response before the handshake", n)
	}
	cfg := ca.clientTLS("", "")
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(c.nc, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal("handshake:", err)
	}
	c = &rawConn{t: t, nc: tc, br: bufio.NewReader(tc)}
	c.expect(FrameResponse, "OK")
	c.send("PUB telemetry.dev-1", []byte("over tls"))
	c.expect(FrameResponse, "OK")
	if got := r.log.Durable(0) + r.log.Durable(1) + r.log.Durable(2); got != 1 {
		t.Fatalf("durable: %d, want 1", got)
	}
}

// TestTLSGoNSQ: go-nsq with TlsV1 and a client certificate publishes and
// consumes through a listener that requires and verifies one; a client
// without a certificate, one of another CA, and a plaintext one are
// refused, each with an error that says why.
func TestTLSGoNSQ(t *testing.T) {
	ca := newTestCA(t, "plant")
	r, _ := tlsRig(t, ca, true)
	cc, ck := ca.issue("worker", false)
	good := ca.clientTLS(cc, ck)

	p, err := nsq.NewProducer(r.addr, tlsNSQConfig(good))
	if err != nil {
		t.Fatal(err)
	}
	p.SetLogger(nil, nsq.LogLevelError)
	defer p.Stop()
	for i := range 10 {
		if err := p.Publish("telemetry.dev-1", []byte{byte('0' + i)}); err != nil {
			t.Fatal("publish over TLS:", err)
		}
	}
	got := make(chan string, 10)
	cons, err := nsq.NewConsumer("telemetry", "w", tlsNSQConfig(good))
	if err != nil {
		t.Fatal(err)
	}
	cons.SetLogger(nil, nsq.LogLevelError)
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		got <- string(m.Body)
		return nil
	}))
	if err := cons.ConnectToNSQD(r.addr); err != nil {
		t.Fatal("consumer over TLS:", err)
	}
	defer cons.Stop()
	for i := range 10 {
		select {
		case b := <-got:
			if b != string(rune('0'+i)) {
				t.Fatalf("message %d: %q", i, b)
			}
		case <-time.After(30 * time.Second): // bounds a hang only
			t.Fatalf("message %d not delivered over TLS", i)
		}
	}
	waitFor(t, func() bool { return r.s.stats.Fin.Load() == 10 })

	other := newTestCA(t, "other")
	oc, ok := other.issue("intruder", false)
	for _, c := range []struct {
		name string
		cfg  *nsq.Config
		want string
	}{
		{"no client certificate", tlsNSQConfig(ca.clientTLS("", "")), "certificate required"},
		{"another CA", tlsNSQConfig(forceCert(ca.clientTLS(oc, ok))), "unknown certificate authority"},
		{"plaintext", nsqConfig(), "TLS required"},
	} {
		before := r.s.stats.TLSFailures.Load()
		bad, _ := nsq.NewProducer(r.addr, c.cfg)
		bad.SetLogger(nil, nsq.LogLevelError)
		err := bad.Publish("telemetry.dev-1", []byte("x"))
		bad.Stop()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		waitFor(t, func() bool { return r.s.stats.TLSFailures.Load() > before })
	}
	if got := r.log.Durable(0) + r.log.Durable(1) + r.log.Durable(2); got != 10 {
		t.Fatalf("durable: %d, want 10 (nothing from refused clients)", got)
	}
}

// TestTLSRequired: with TLS, nothing but IDENTIFY with tls_v1 is taken
// before the upgrade — no PUB, no AUTH (the token would cross in clear),
// no IDENTIFY without tls_v1 — and data sent before the handshake closes
// the connection.
func TestTLSRequired(t *testing.T) {
	ca := newTestCA(t, "plant")
	r, _ := tlsRig(t, ca, false)
	for _, c := range []struct {
		cmd  string
		body []byte
		want string
	}{
		{"PUB telemetry.a", []byte("x"), "E_INVALID cannot PUB in current state (TLS required"},
		{"AUTH", []byte("s3cret"), "E_INVALID cannot AUTH in current state (TLS required"},
		{"NOP", nil, "E_INVALID cannot NOP in current state (TLS required"},
		{"IDENTIFY", []byte(`{"feature_negotiation":true}`), "E_INVALID TLS required: IDENTIFY with tls_v1"},
		{"IDENTIFY", []byte(`{"tls_v1":true}`), "E_INVALID TLS required: IDENTIFY with tls_v1 and feature_negotiation"},
	} {
		rc := dialRaw(t, r)
		rc.send(c.cmd, c.body)
		rc.expect(FrameError, c.want)
		rc.expectClosed()
	}
	rc := dialRaw(t, r)
	body := `{"feature_negotiation":true,"tls_v1":true}`
	b := binary.BigEndian.AppendUint32([]byte("IDENTIFY\n"), uint32(len(body)))
	b = append(append(b, body...), "NOP\n"...)
	if _, err := rc.nc.Write(b); err != nil {
		t.Fatal(err)
	}
	rc.expect(FrameResponse, "{")
	rc.expectClosed()
	if got := r.log.Durable(0) + r.log.Durable(1) + r.log.Durable(2); got != 0 {
		t.Fatalf("durable: %d, want 0", got)
	}
}

// TestTLSReload: a renewed certificate (Adopt, as SIGHUP does) is what
// new connections get; a connection made before keeps working.
func TestTLSReload(t *testing.T) {
	ca := newTestCA(t, "plant")
	r, store := tlsRig(t, ca, false)
	p, _ := nsq.NewProducer(r.addr, tlsNSQConfig(ca.clientTLS("", "")))
	p.SetLogger(nil, nsq.LogLevelError)
	defer p.Stop()
	if err := p.Publish("telemetry.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	next := newTestCA(t, "renewed")
	cert, key := next.issue("gw2", true)
	ns, err := tlsconf.Load(tlsconf.Files{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	store.Adopt(ns)
	if err := p.Publish("telemetry.a", []byte("2")); err != nil {
		t.Fatal("connection made before the reload:", err)
	}
	p2, _ := nsq.NewProducer(r.addr, tlsNSQConfig(next.clientTLS("", "")))
	p2.SetLogger(nil, nsq.LogLevelError)
	defer p2.Stop()
	if err := p2.Publish("telemetry.a", []byte("3")); err != nil {
		t.Fatal("new connection with the renewed certificate's CA:", err)
	}
	p3, _ := nsq.NewProducer(r.addr, tlsNSQConfig(ca.clientTLS("", "")))
	p3.SetLogger(nil, nsq.LogLevelError)
	defer p3.Stop()
	if err := p3.Publish("telemetry.a", []byte("4")); err == nil {
		t.Fatal("new connection trusting only the old CA: accepted")
	}
}
