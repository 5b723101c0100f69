package wal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// The offsets journal (offsets.log): committed offsets are appended as small
// CRC'd records, never rewritten in place; opening replays them, and a
// journal grown well past its live content is compacted (one snapshot
// written to a temp file, fsynced and renamed over it).
//
// Frame: uint32 length of body, uint32 CRC32C of body (both little-endian),
// body. Body: type, uvarint length + consumer name, then
//
//	commit:  uvarint partition, uvarint offset
//	drained: one byte, 1 or 0
//	remove:  nothing
//
// Replay stops at the first frame that is short, has a zero or oversized
// length, a bad CRC or an unknown type: a torn or zero-filled tail after a
// power cut. Whatever follows it is cut off.
const (
	offsetsLogFile = "offsets.log"

	opCommit  byte = 1
	opDrained byte = 2
	opRemove  byte = 3

	offsetFrameHeader = 8
	maxOffsetBody     = 1 + binary.MaxVarintLen64*3 + 4096
)

// offsetState is the replayed content of an offsets journal.
type offsetState struct {
	consumers map[string]map[int]uint64
	drained   map[string]bool
}

func newOffsetState() offsetState {
	return offsetState{consumers: map[string]map[int]uint64{}, drained: map[string]bool{}}
}

// apply replays one body; false when it does not parse.
func (st *offsetState) apply(body []byte) bool {
	if len(body) < 2 {
		return false
	}
	op := body[0]
	n, k := binary.Uvarint(body[1:])
	if k <= 0 || n == 0 || uint64(len(body)-1-k) < n {
		return false
	}
	name := string(body[1+k : 1+k+int(n)])
	rest := body[1+k+int(n):]
	switch op {
	case opCommit:
		part, k1 := binary.Uvarint(rest)
		if k1 <= 0 || part > 1<<20 {
			return false
		}
		off, k2 := binary.Uvarint(rest[k1:])
		if k2 <= 0 || k1+k2 != len(rest) {
			return false
		}
		m, ok := st.consumers[name]
		if !ok {
			m = map[int]uint64{}
			st.consumers[name] = m
		}
		m[int(part)] = off
	case opDrained:
		if len(rest) != 1 || rest[0] > 1 {
			return false
		}
		if rest[0] == 1 {
			st.drained[name] = true
		} else {
			delete(st.drained, name)
		}
	case opRemove:
		if len(rest) != 0 {
			return false
		}
		delete(st.consumers, name)
		delete(st.drained, name)
	default:
		return false
	}
	return true
}

// replayOffsets parses a journal. valid is the length of its good prefix.
func replayOffsets(data []byte) (st offsetState, valid int) {
	st = newOffsetState()
	for pos := 0; ; {
		if len(data)-pos < offsetFrameHeader {
			return st, pos
		}
		n := int(binary.LittleEndian.Uint32(data[pos:]))
		sum := binary.LittleEndian.Uint32(data[pos+4:])
		if n == 0 || n > maxOffsetBody || len(data)-pos-offsetFrameHeader < n {
			return st, pos
		}
		body := data[pos+offsetFrameHeader : pos+offsetFrameHeader+n]
		if crc32.Checksum(body, castagnoli) != sum {
			return st, pos
		}
		// Applied to a copy first: a frame that does not parse changes nothing.
		probe := offsetState{consumers: map[string]map[int]uint64{}, drained: map[string]bool{}}
		if !probe.apply(body) {
			return st, pos
		}
		st.apply(body)
		pos += offsetFrameHeader + n
	}
}

// appendOffsetFrame appends one journal frame to dst.
func appendOffsetFrame(dst []byte, op byte, name string, args ...uint64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, offsetFrameHeader)...)
	dst = append(dst, op)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	switch op {
	case opCommit:
		dst = binary.AppendUvarint(dst, args[0])
		dst = binary.AppendUvarint(dst, args[1])
	case opDrained:
		dst = append(dst, byte(args[0]))
	}
	body := dst[start+offsetFrameHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

// snapshotOffsets encodes a whole state as a journal, in a stable order.
func snapshotOffsets(consumers map[string]map[int]uint64, drained map[string]bool) []byte {
	names := make([]string, 0, len(consumers))
	for name := range consumers {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []byte
	for _, name := range names {
		parts := make([]int, 0, len(consumers[name]))
		for p := range consumers[name] {
			parts = append(parts, p)
		}
		sort.Ints(parts)
		for _, p := range parts {
			out = appendOffsetFrame(out, opCommit, name, uint64(p), consumers[name][p])
		}
		if drained[name] {
			out = appendOffsetFrame(out, opDrained, name, 1)
		}
	}
	return out
}

var errOffsetName = errors.New("wal: consumer name too long for the offsets journal")

func checkOffsetName(name string) error {
	if len(name) == 0 || len(name) > 4096 {
		return fmt.Errorf("%w: %d bytes", errOffsetName, len(name))
	}
	return nil
}

// ReadOffsets reads the committed offsets kept in the log directory dir
// (consumer → partition → offset) without opening the log or repairing
// anything: the journal's good frames, or offsets.json of older versions.
func ReadOffsets(dir string) (map[string]map[int]uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, offsetsLogFile))
	if err == nil {
		st, _ := replayOffsets(data)
		return st.consumers, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("wal: read offsets: %w", err)
	}
	s := &OffsetStore{dir: dir, consumers: map[string]map[int]uint64{}, drained: map[string]bool{}}
	data, err = os.ReadFile(filepath.Join(dir, offsetsFile))
	if errors.Is(err, os.ErrNotExist) {
		return s.consumers, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read offsets: %w", err)
	}
	var doc offsetsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("wal: parse %s: %w", offsetsFile, err)
	}
	for name, parts := range doc.Consumers {
		m := map[int]uint64{}
		for k, v := range parts {
			p, err := strconv.Atoi(k)
			if err != nil {
				return nil, fmt.Errorf("wal: parse %s: consumer %q: bad partition %q", offsetsFile, name, k)
			}
			m[p] = v
		}
		s.consumers[name] = m
	}
	return s.consumers, nil
}
