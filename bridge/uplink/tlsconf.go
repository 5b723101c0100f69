package uplink

import (
	"crypto/tls"
	"fmt"

	"edgeq/internal/tlsfiles"
)

// tlsConfig builds the client TLS configuration of cfg: a CA file to verify
// the upstream (empty: system roots) and an optional client certificate.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	tc, err := tlsfiles.Client(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: %w", cfg.Name, err)
	}
	return tc, nil
}

func (c *Config) wantsTLS() bool { return c.CAFile != "" || c.CertFile != "" }
