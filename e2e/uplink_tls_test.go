package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newTestPKI(t *testing.T) testPKI {
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgeq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// TestUplinkNATSTLS: the upstream requires TLS with a client certificate
// (verified against the CA) and a token; the uplink forwards with ca_file,
// cert_file, key_file and nats.token.
func TestUplinkNATSTLS(t *testing.T) {
	pki := newTestPKI(t)
	js := newJSServer(t)
	js.extra = []string{"--tls", "--tlscert", pki.serverCert, "--tlskey", pki.serverKey, "--tlsverify", "--tlscacert", pki.ca, "--auth", "s3cret-token"}
	js.connect = []nats.Option{nats.RootCAs(pki.ca), nats.ClientCert(pki.clientCert, pki.clientKey), nats.Token("s3cret-token")}
	js.start()
	js.createStream()
	if nc, err := nats.Connect(js.url(), nats.RootCAs(pki.ca), nats.ClientCert(pki.clientCert, pki.clientKey)); err == nil {
		nc.Close()
		t.Fatal("the upstream accepts a client without the token: the test would prove nothing")
	}
	n := newNode(t, fmt.Sprintf(`uplinks:
  - name: cloud
    type: nats
    timeout: 2s
    retry_min: 50ms
    retry_max: 500ms
    ca_file: %s
    cert_file: %s
    key_file: %s
    nats: {url: "tls://127.0.0.1:%d", subject: "plant3.{device}", token: s3cret-token}
`, pki.ca, pki.clientCert, pki.clientKey, js.port))
	n.start()
	pub := newPublisher(t, n.url(), 100)
	for i := 1; i <= 50; i++ {
		pub.publish(fmt.Sprintf("tls-%d", i%5), fmt.Sprintf("tls-%d|%d", i%5, i))
	}
	waitFor(t, "acked", 30*time.Second, func() bool { return pub.acked() == 50 })
	waitFor(t, "forwarded over TLS", 30*time.Second, func() bool { return js.streamMsgs() == 50 })
	if dupes := checkUpstream(t, pub.ackedPayloads(), js.readStream(t)); dupes > 0 {
		t.Errorf("%d duplicates", dupes)
	}
}
