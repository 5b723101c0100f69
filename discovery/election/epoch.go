package election

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Epoch identifies one leadership of a group: a number that a new leader
// sets to one above the highest it has seen, and the leader itself. The
// leader's ID makes epochs unique without coordination (like Paxos ballot
// numbers): on the two sides of a partition, two nodes may pick the same
// number, but never the same Epoch, so a partition owner that has accepted
// one of them refuses the other. Epochs are ordered by number, then leader
// ID. The zero Epoch means "none seen" and is below every other.
type Epoch struct {
	N      uint64
	Leader NodeID
}

// Compare returns -1, 0 or +1 as e is older than, equal to or newer than o.
func (e Epoch) Compare(o Epoch) int {
	if c := cmp.Compare(e.N, o.N); c != 0 {
		return c
	}
	return strings.Compare(string(e.Leader), string(o.Leader))
}

// IsZero reports whether e is the zero Epoch (none seen).
func (e Epoch) IsZero() bool { return e == Epoch{} }

// valid reports whether a leader can hold e. The largest number is refused
// so that "one above the highest seen" never overflows.
func (e Epoch) valid() bool {
	return e.N > 0 && e.N < math.MaxUint64 && validName(string(e.Leader))
}

// String formats e as "N:leader" ("0" for the zero Epoch).
func (e Epoch) String() string {
	if e.IsZero() {
		return "0"
	}
	return fmt.Sprintf("%d:%s", e.N, e.Leader)
}

// ParseEpoch parses the String form.
func ParseEpoch(s string) (Epoch, error) {
	if s == "0" {
		return Epoch{}, nil
	}
	n, leader, ok := strings.Cut(s, ":")
	num, err := strconv.ParseUint(n, 10, 64)
	e := Epoch{N: num, Leader: NodeID(leader)}
	if err != nil || !ok || !e.valid() {
		return Epoch{}, fmt.Errorf("election: parse epoch %q: %w", s, ErrBadEpoch)
	}
	return e, nil
}
