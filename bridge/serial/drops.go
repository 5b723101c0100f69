package serial

import "sync/atomic"

// DropReason says why a frame was not stored.
type DropReason uint8

// Drop reasons. The zero value means "not dropped".
const (
	dropNone DropReason = iota
	// DropOversize: longer than max_frame; discarded up to the next newline.
	DropOversize
	// DropNonUTF8: not valid UTF-8.
	DropNonUTF8
	// DropMalformed: not valid for the format (bad JSON, bad line syntax).
	DropMalformed
	// DropBadDevice: no device ID, or one wal.ValidateDeviceID refuses.
	DropBadDevice
	// DropIncomplete: a partial frame lost when the port closed.
	DropIncomplete
	// DropShutdown: a complete frame read while stopping with no room left
	// for another append.
	DropShutdown
	numDropReasons
)

var dropNames = [numDropReasons]string{
	dropNone:       "none",
	DropOversize:   "oversize",
	DropNonUTF8:    "non_utf8",
	DropMalformed:  "malformed",
	DropBadDevice:  "bad_device",
	DropIncomplete: "incomplete",
	DropShutdown:   "shutdown",
}

func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// dropCounters counts dropped frames by reason.
type dropCounters [numDropReasons]atomic.Uint64

func (d *dropCounters) add(r DropReason) {
	if r > dropNone && r < numDropReasons {
		d[r].Add(1)
	}
}

// snapshot returns every reason, zeros included, so the status schema is stable.
func (d *dropCounters) snapshot() map[string]uint64 {
	m := make(map[string]uint64, numDropReasons-1)
	for r := dropNone + 1; r < numDropReasons; r++ {
		m[r.String()] = d[r].Load()
	}
	return m
}
