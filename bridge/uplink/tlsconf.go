package uplink

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// tlsConfig builds the client TLS configuration of cfg: a CA file to verify
// the upstream (empty: system roots) and an optional client certificate.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: ca_file: %w", cfg.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("uplink %s: ca_file %s: no certificate found", cfg.Name, cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.CertFile != "" {
		c, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: cert_file/key_file: %w", cfg.Name, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

func (c *Config) wantsTLS() bool { return c.CAFile != "" || c.CertFile != "" }
