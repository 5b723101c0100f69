package jsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
	"edgeq/internal/fsutil"
)

// The consumer definitions are kept in Config.StateFile
// (<data_dir>/jetstream-consumers.json), replaced atomically on every
// create and delete:
//
//	{"version":1,"consumers":[{"name":"workers","created":"...","ephemeral":false,"config":{...}}]}
//
// config is the consumer's configuration as CONSUMER.INFO shows it (the
// JetStream API's JSON). The queue group's offsets are the log's (the
// offset store); this file only says which consumers exist.

// stateVersion is the version of the file's format.
const stateVersion = 1

// maxStateBytes bounds the file read at start (a consumer's configuration
// is well under 4 KiB; config bounds their number).
const maxStateBytes = 16 << 20

type stateFile struct {
	Version   int          `json:"version"`
	Consumers []stateEntry `json:"consumers"`
}

type stateEntry struct {
	Name      string                   `json:"name"`
	Created   time.Time                `json:"created"`
	Ephemeral bool                     `json:"ephemeral,omitempty"`
	Config    jetstream.ConsumerConfig `json:"config"`
}

// ErrBadState: the consumer file cannot be used.
var ErrBadState = errors.New("jsapi: bad consumer file")

// encodeState is the file's content for consumers.
func encodeState(consumers map[string]*Consumer) ([]byte, error) {
	st := stateFile{Version: stateVersion, Consumers: make([]stateEntry, 0, len(consumers))}
	for _, c := range consumers {
		st.Consumers = append(st.Consumers, stateEntry{Name: c.Name, Created: c.Created, Ephemeral: c.Ephemeral, Config: c.Config})
	}
	sort.Slice(st.Consumers, func(i, j int) bool { return st.Consumers[i].Name < st.Consumers[j].Name })
	return json.MarshalIndent(st, "", "  ")
}

// decodeState reads a file's content: entries with valid, distinct names,
// oldest first. Anything else is ErrBadState.
func decodeState(b []byte) ([]stateEntry, error) {
	var st stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the object", ErrBadState)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadState, st.Version, stateVersion)
	}
	seen := make(map[string]bool, len(st.Consumers))
	for _, e := range st.Consumers {
		if !ValidName(e.Name) || e.Config.Name != e.Name || seen[e.Name] {
			return nil, fmt.Errorf("%w: consumer name %q invalid, repeated or not its config's", ErrBadState, e.Name)
		}
		seen[e.Name] = true
	}
	sort.SliceStable(st.Consumers, func(i, j int) bool { return st.Consumers[i].Created.Before(st.Consumers[j].Created) })
	return st.Consumers, nil
}

// saveLocked writes the consumer file. Called with mu.
func (s *Service) saveLocked() error {
	if s.cfg.StateFile == "" {
		return nil
	}
	b, err := encodeState(s.consumers)
	if err != nil {
		return fmt.Errorf("jsapi: encode consumers: %w", err)
	}
	return fsutil.WriteFileAtomic(s.cfg.StateFile, b, 0o600)
}

// Restore creates the consumers kept in the state file: each one's queue
// group is declared again and resumes from its committed offsets. A file
// that cannot be read as one is set aside as <file>.corrupt and logged; the
// node starts without its consumers. Consumers over max_consumers, or that
// this configuration refuses, are logged and dropped. Call once, after
// SetHooks and before serving.
func (s *Service) Restore() error {
	if s.cfg.StateFile == "" {
		return nil
	}
	entries, err := s.readState()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if errors.Is(err, ErrBadState) {
		bad := s.cfg.StateFile + ".corrupt"
		s.logger.Error("consumer file unusable: set aside, starting without its consumers", "file", s.cfg.StateFile, "moved_to", bad, "err", err)
		if rerr := os.Rename(s.cfg.StateFile, bad); rerr != nil {
			return fmt.Errorf("jsapi: set aside %s: %w", s.cfg.StateFile, rerr)
		}
		return fsutil.SyncDir(filepath.Dir(s.cfg.StateFile))
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	dropped := 0
	for _, e := range entries {
		if len(s.consumers) >= s.cfg.MaxConsumers {
			s.logger.Warn("consumer not restored: over jetstream.max_consumers", "consumer", e.Name, "max_consumers", s.cfg.MaxConsumers)
			dropped++
			continue
		}
		p, apiErr := s.plan(e.Config, e.Ephemeral)
		if apiErr != nil {
			s.logger.Warn("consumer not restored: its configuration is refused now", "consumer", e.Name, "err", apiErr.Description)
			dropped++
			continue
		}
		if err := s.reg.Declare(groups.GroupConfig{Key: p.key, Core: p.core, Start: p.start}); err != nil {
			s.logger.Warn("consumer not restored: its queue group cannot start", "consumer", e.Name, "err", err)
			dropped++
			continue
		}
		c := &Consumer{Name: e.Name, Config: p.cc, Key: p.key, Created: e.Created, Ephemeral: e.Ephemeral, active: now}
		s.consumers[c.Name] = c
		if s.hooks.Created != nil {
			s.hooks.Created(c)
		}
	}
	s.logger.Info("consumers restored", "consumers", len(s.consumers), "dropped", dropped)
	if dropped > 0 {
		return s.saveLocked()
	}
	return nil
}

func (s *Service) readState() ([]stateEntry, error) {
	f, err := os.Open(s.cfg.StateFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("jsapi: read %s: %w", s.cfg.StateFile, err)
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBadState, maxStateBytes)
	}
	return decodeState(b)
}
