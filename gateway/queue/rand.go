package queue

import "math/bits"

// Rand is the random source member choice draws from. *math/rand/v2.Rand
// satisfies it; tests pass a seeded one so every run is reproducible.
type Rand interface {
	Uint64() uint64
}

// randIntN returns a number in [0, n) for n > 0 (Lemire's multiply-high; the
// bias is below 2^-32 for any n a group can have).
func randIntN(r Rand, n int) int {
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// hashString is FNV-1a 64: a fixed, portable hash so sticky assignment is the
// same on every node and every run (never Go's seeded map hash).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the splitmix64 finalizer; it spreads rendezvous scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
