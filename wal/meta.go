package wal

import (
	"edgeq/internal/fsutil"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// meta records what a data directory was created with. Partition counts and the
// hash decide where every device's records are; changing them would scatter a
// device over partitions, so Open refuses a mismatch.
type meta struct {
	Format        int    `json:"format"`
	Partitions    int    `json:"partitions"`
	HotPartitions int    `json:"hot_partitions"`
	Hash          string `json:"hash"`
	Seed          uint64 `json:"seed"`
}

const metaFile = "meta.json"

func currentMeta(o *Options) meta {
	return meta{Format: 1, Partitions: o.Partitions, HotPartitions: o.HotPartitions, Hash: "xxhash64", Seed: HashSeed}
}

func checkMeta(dir string, o *Options) error {
	want := currentMeta(o)
	path := filepath.Join(dir, metaFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		data, _ = json.MarshalIndent(want, "", " ")
		return fsutil.WriteFileAtomic(path, data, 0o640)
	}
	if err != nil {
		return fmt.Errorf("wal: read %s: %w", path, err)
	}
	var got meta
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Errorf("wal: parse %s: %w", path, err)
	}
	if got != want {
		return fmt.Errorf("wal: %s was created with partitions=%d hot_partitions=%d hash=%s format=%d; "+
			"this configuration has partitions=%d hot_partitions=%d hash=%s format=%d (use the original values or a new data directory)",
			dir, got.Partitions, got.HotPartitions, got.Hash, got.Format,
			want.Partitions, want.HotPartitions, want.Hash, want.Format)
	}
	return nil
}
