package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 named cn.
func selfSigned(t *testing.T, dir, cn string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+"-key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReloadSwapsCertificateKeepingConnections: after Reload, new
// handshakes get the new certificate and a connection made before keeps
// working; a reload from broken files keeps the old material.
func TestReloadSwapsCertificateKeepingConnections(t *testing.T) {
	dir := t.TempDir()
	c1, k1, pool1 := selfSigned(t, dir, "one")
	c2, k2, pool2 := selfSigned(t, dir, "two")
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyFile(t, c1, cert)
	copyFile(t, k1, key)
	s, err := Load(Files{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo
				defer c.Close()
				b := make([]byte, 64)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					c.Write(b[:n])
				}
			}()
		}
	}()
	dial := func(pool *x509.CertPool) (*tls.Conn, error) {
		return tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool})
	}
	echo := func(c *tls.Conn) error {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 4))
		return err
	}
	old, err := dial(pool1)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if old.ConnectionState().Version < tls.VersionTLS12 {
		t.Fatal("below TLS 1.2")
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool1, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
	copyFile(t, c2, cert)
	copyFile(t, k2, key)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if c, err := dial(pool2); err != nil {
		t.Fatalf("new certificate after reload: %v", err)
	} else {
		c.Close()
	}
	if _, err := dial(pool1); err == nil {
		t.Fatal("the old certificate is still served")
	}
	if err := echo(old); err != nil {
		t.Fatalf("a connection from before the reload broke: %v", err)
	}
	os.WriteFile(key, []byte("garbage"), 0o600)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Fatalf("broken key reloaded: %v", err)
	}
	if c, err := dial(pool2); err != nil {
		t.Fatalf("a failed reload dropped the material in use: %v", err)
	} else {
		c.Close()
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	c, k, _ := selfSigned(t, dir, "one")
	for _, f := range []Files{
		{CertFile: c},
		{CertFile: c, KeyFile: k, Verify: true},
		{CertFile: c, KeyFile: filepath.Join(dir, "missing.pem")},
		{CertFile: c, KeyFile: k, CAFile: k},
	} {
		if _, err := Load(f); err == nil {
			t.Errorf("loaded %+v", f)
		}
	}
}
