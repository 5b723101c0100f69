// Package tlsfiles builds client TLS configurations from PEM files, for the
// bridges and uplinks that dial TLS servers.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificates: a CA file holds no PEM certificate.
var ErrNoCertificates = errors.New("no PEM certificates found")

// Client returns a TLS 1.2+ client configuration: caFile verifies the
// server (empty: the system roots), certFile and keyFile are an optional
// client certificate. Errors name the setting: "ca_file: ..." or
// "cert_file/key_file: ...".
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: %s: %w", caFile, ErrNoCertificates)
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
