package mqtt

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
	"slices"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// QoS 0 and QoS 2 subscriptions store every message once, in order.
func TestOtherQoSLevels(t *testing.T) {
	for _, qos := range []int{0, 2} {
		t.Run(fmt.Sprintf("qos=%d", qos), func(t *testing.T) {
			mq := startMosquitto(t, brokerOptions{})
			log := openLog(t, t.TempDir())
			defer log.Close()
			cfg := testConfig("qos", mq.url())
			cfg.QoS = qos
			b := startBridge(t, cfg, log)
			waitFor(t, 10*time.Second, "subscribed", func() bool { return b.Status().Subscribed })

			const devices, perDevice = 10, 50
			msgs := makeMessages(devices, perDevice)
			publishQoS(t, mq.url(), byte(qos), msgs)
			waitFor(t, 20*time.Second, "all stored", func() bool { return b.Status().Counters.Stored >= uint64(len(msgs)) })
			if err := b.Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			st := b.Status().Counters
			wantAcked := uint64(len(msgs))
			if qos == 0 {
				wantAcked = 0 // QoS 0 has no acknowledgement
			}
			if st.Acked != wantAcked || st.Stored != uint64(len(msgs)) {
				t.Errorf("stored %d, acked %d; want %d, %d", st.Stored, st.Acked, len(msgs), wantAcked)
			}
			c := readLog(t, log)
			want := make([]int, perDevice)
			for i := range want {
				want[i] = i
			}
			for d := 0; d < devices; d++ {
				if got := c.perDev[deviceName(d)]; !slices.Equal(got, want) {
					t.Fatalf("device %d: counters %v, want 0..%d once each in order", d, got, perDevice-1)
				}
			}
		})
	}
}

func publishQoS(t *testing.T, broker string, qos byte, msgs []pubMsg) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(broker).SetClientID("pub-" + t.Name()))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer c.Disconnect(250)
	for i, m := range msgs {
		if tok := c.Publish(m.topic, qos, false, m.payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
}

// The bridge connects over TLS with a client certificate to a listener that
// requires one; a plain listener of the same broker serves the publisher.
func TestTLSWithClientCertificate(t *testing.T) {
	dir := t.TempDir()
	files := writeTestPKI(t, dir)
	tlsPort := freePort(t)
	extra := fmt.Sprintf("listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate true\n",
		tlsPort, files["ca"], files["server"], files["server-key"])
	mq := startMosquitto(t, brokerOptions{extra: extra})
	log := openLog(t, t.TempDir())
	defer log.Close()

	cfg := testConfig("tls", fmt.Sprintf("ssl://127.0.0.1:%d", tlsPort))
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = files["ca"], files["client"], files["client-key"]
	b := startBridge(t, cfg, log)
	waitFor(t, 10*time.Second, "subscribed over TLS", func() bool { return b.Status().Subscribed })
	msgs := makeMessages(5, 20)
	pahoPublish(t, mq.url(), msgs)
	waitFor(t, 10*time.Second, "all stored", func() bool { return b.Status().Counters.Stored >= uint64(len(msgs)) })

	// Without the client certificate the broker refuses the handshake.
	cfg.Name, cfg.ClientID, cfg.CertFile, cfg.KeyFile = "notls", "no-cert", "", ""
	b2 := startBridge(t, cfg, log)
	waitFor(t, 10*time.Second, "a TLS error in the status", func() bool { return b2.Status().LastError != "" })
	if st := b2.Status(); st.Connected {
		t.Fatalf("connected without a client certificate: %+v", st)
	}
}

// writeTestPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, as PEM files in dir.
func writeTestPKI(t *testing.T, dir string) map[string]string {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgeq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"ca": writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)}
	for i, name := range []string{"server", "client"} {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = writePEM(t, dir, name+".pem", "CERTIFICATE", der)
		files[name+"-key"] = writePEM(t, dir, name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	return files
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
