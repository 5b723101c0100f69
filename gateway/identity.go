package gateway

import (
	"crypto/rand"
	"edgeq/internal/fsutil"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"edgeq/wal"
)

const nodeIDFile = "node-id"

// LoadNodeID returns the configured node ID, or the one kept in the data
// directory, creating it on first start. A configured ID that differs from the
// stored one replaces it (the operator renamed the node).
func LoadNodeID(dataDir, configured string) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	if configured != "" {
		if err := wal.ValidateDeviceID(configured); err != nil {
			return "", fmt.Errorf("node id %q: %w", configured, err)
		}
	}
	data, err := os.ReadFile(path)
	stored := strings.TrimSpace(string(data))
	switch {
	case err == nil && stored != "" && (configured == "" || configured == stored):
		if wal.ValidateDeviceID(stored) != nil {
			return "", fmt.Errorf("node id in %s is invalid: %q", path, stored)
		}
		return stored, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read node id: %w", err)
	}
	id := configured
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("generate node id: %w", err)
		}
		host, _ := os.Hostname()
		id = "edgeq-" + hex.EncodeToString(b[:])
		if host != "" && wal.ValidateDeviceID(host+"-"+hex.EncodeToString(b[:2])) == nil {
			id = host + "-" + hex.EncodeToString(b[:3])
		}
	}
	if err := fsutil.MkdirAll(dataDir, 0o750); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, []byte(id+"\n"), 0o640); err != nil {
		return "", fmt.Errorf("write node id: %w", err)
	}
	return id, nil
}
