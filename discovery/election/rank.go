package election

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// NodeID names a node of the cluster (persisted in its data dir).
type NodeID string

// MaxNameLen bounds node IDs and group names, in bytes.
const MaxNameLen = 255

// HashSeed is the fixed seed of the rendezvous hash. Every node must use the
// same one, so it is part of the wire protocol: changing it changes ranks.
const HashSeed uint64 = 0x6564676571_0e1e // "edgeq" + "election"

// RendezvousHash is the seeded xxhash64 of node + "\x00" + group. It is the
// same on every architecture. Names never contain NUL (see ErrBadName), so
// distinct (node, group) pairs hash distinct strings.
func RendezvousHash(node NodeID, group string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(HashSeed)
	_, _ = d.WriteString(string(node))
	_, _ = d.WriteString("\x00")
	_, _ = d.WriteString(group)
	return d.Sum64()
}

// Rank orders the nodes of one group: higher priority wins, ties are broken
// by the rendezvous hash (so equal nodes lead different groups), then by
// node ID (so the order is total).
type Rank struct {
	Priority int
	Hash     uint64
	Node     NodeID
}

// RankOf returns the rank of node, with the given priority, in group.
func RankOf(node NodeID, priority int, group string) Rank {
	return Rank{Priority: priority, Hash: RendezvousHash(node, group), Node: node}
}

// Compare returns -1, 0 or +1 as r ranks below, equal to or above o.
func (r Rank) Compare(o Rank) int {
	if c := cmp.Compare(r.Priority, o.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(r.Hash, o.Hash); c != 0 {
		return c
	}
	return strings.Compare(string(r.Node), string(o.Node))
}

// Above reports whether r ranks strictly above o.
func (r Rank) Above(o Rank) bool { return r.Compare(o) > 0 }

func (r Rank) String() string { return fmt.Sprintf("%s/%d/%016x", r.Node, r.Priority, r.Hash) }

func validName(s string) bool {
	return s != "" && len(s) <= MaxNameLen && !strings.ContainsRune(s, 0)
}
