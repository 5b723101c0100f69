// Package tlsconf loads a listener's TLS certificate, key and client CA
// from files into a tls.Config whose material can be swapped at run time
// (Reload): connections in progress keep theirs, new handshakes get the new
// one, so a SIGHUP reload drops no client.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Files says where a listener's TLS material is.
type Files struct {
	CertFile string // PEM certificate chain
	KeyFile  string // PEM private key
	// CAFile holds the CAs client certificates are verified against;
	// Verify requires a client certificate signed by one of them.
	CAFile string
	Verify bool
}

// Store is the current TLS material of one listener.
type Store struct {
	files Files
	cur   atomic.Pointer[material]
}

type material struct {
	cert    *tls.Certificate
	clients *x509.CertPool // nil without a CA file
}

// Load reads the files; errors name the file.
func Load(f Files) (*Store, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tls: cert_file and key_file are required")
	}
	if f.Verify && f.CAFile == "" {
		return nil, errors.New("tls: verify needs ca_file")
	}
	s := &Store{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again; on an error the material in use stays.
func (s *Store) Reload() error {
	cert, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return fmt.Errorf("tls: cert_file %s, key_file %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	m := &material{cert: &cert}
	if s.files.CAFile != "" {
		pem, err := os.ReadFile(s.files.CAFile)
		if err != nil {
			return fmt.Errorf("tls: ca_file: %w", err)
		}
		m.clients = x509.NewCertPool()
		if !m.clients.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: ca_file %s: no PEM certificate", s.files.CAFile)
		}
	}
	s.cur.Store(m)
	return nil
}

// Config is a server tls.Config (TLS 1.2 or later) that reads the current
// material at each handshake.
func (s *Store) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
			if m.clients != nil {
				c.ClientCAs = m.clients
				c.ClientAuth = tls.VerifyClientCertIfGiven
				if s.files.Verify {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// Verify reports whether client certificates are required.
func (s *Store) Verify() bool { return s.files.Verify }
