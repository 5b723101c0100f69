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
	"sync"
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
	mu    sync.Mutex // serializes Reload and Adopt
	files Files
	cur   atomic.Pointer[material]
}

type material struct {
	cert    *tls.Certificate
	clients *x509.CertPool // nil without a CA file
	verify  bool
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
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := read(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

// Adopt takes the files and material of other (a Store loaded from a new
// configuration), so that a reload of several listeners can load them all
// first and change none when one fails.
func (s *Store) Adopt(other *Store) {
	other.mu.Lock()
	f, m := other.files, other.cur.Load()
	other.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files = f
	s.cur.Store(m)
}

func read(f Files) (*material, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s, key_file %s: %w", f.CertFile, f.KeyFile, err)
	}
	m := &material{cert: &cert, verify: f.Verify}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		m.clients = x509.NewCertPool()
		if !m.clients.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s: no PEM certificate", f.CAFile)
		}
	}
	return m, nil
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
				if m.verify {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}
