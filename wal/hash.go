package wal

import "github.com/cespare/xxhash/v2"

// HashSeed is the fixed seed of the device→partition hash. Changing it moves every
// device to another partition, so it is part of the on-disk format (see meta.go).
const HashSeed uint64 = 0x6564676571_0001 // "edgeq" + format 1

// DeviceHash is the portable, seeded 64-bit hash of a device ID (xxhash64). It is
// the same on every architecture, unlike Go's map hash.
func DeviceHash(device string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(HashSeed)
	_, _ = d.WriteString(device)
	return d.Sum64()
}

// PartitionFor maps a device to one of n partitions.
func PartitionFor(device string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(DeviceHash(device) % uint64(n))
}
