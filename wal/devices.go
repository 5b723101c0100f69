package wal

import (
	"bytes"
	"edgeq/internal/fsutil"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// deviceState is what the log remembers per device: its last sequence number
// and where its records go now.
type deviceState struct {
	lastSeq   uint64
	partition int
	moveRef   Ref    // marker of the device's latest move; carried by its records
	moves     uint64 // number of moves so far; orders markers at recovery
}

// deviceTable maps device IDs to their state. It is bounded by max devices and
// guarded by Log.mu.
type deviceTable struct {
	m   map[string]*deviceState
	max int
}

func newDeviceTable(max int) *deviceTable {
	return &deviceTable{m: make(map[string]*deviceState), max: max}
}

// get returns the device's state, creating it on its home partition.
func (t *deviceTable) get(device string, normalPartitions int) (*deviceState, error) {
	if d, ok := t.m[device]; ok {
		return d, nil
	}
	if len(t.m) >= t.max {
		return nil, fmt.Errorf("%w: %d devices", ErrTooManyDevices, t.max)
	}
	d := &deviceState{partition: PartitionFor(device, normalPartitions)}
	// The caller's string may alias a network buffer.
	t.m[strings.Clone(device)] = d
	return d, nil
}

// Len is the number of known devices.
func (t *deviceTable) Len() int { return len(t.m) }

// The checkpoint lets Open rebuild the device table without scanning the whole
// log, and keeps sequence numbers of devices whose records retention removed.
// Layout: "EQDT" version(1) uvarint(partitions) uvarint(covered offset)...
// uvarint(devices) then per device: str id, uvarint lastSeq, uvarint partition,
// uvarint moveRef.partition+1 [uvarint moveRef.offset], uvarint moves; CRC32C.
const checkpointFile = "devices.ckpt"

var checkpointMagic = []byte("EQDT\x01")

// checkpoint writes the device table. Covered offsets are each partition's last
// written index read under Log.mu: every record at or below them was enqueued
// before the snapshot, so its effect is in it; records after are rescanned.
func (l *Log) checkpoint() error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	l.mu.Lock()
	buf := make([]byte, 0, 64+len(l.devices.m)*32)
	buf = append(buf, checkpointMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(l.parts)))
	for _, p := range l.parts {
		buf = binary.AppendUvarint(buf, p.last.Load())
	}
	buf = binary.AppendUvarint(buf, uint64(len(l.devices.m)))
	for id, d := range l.devices.m {
		buf = appendString(buf, id)
		buf = binary.AppendUvarint(buf, d.lastSeq)
		buf = binary.AppendUvarint(buf, uint64(d.partition))
		if d.moveRef.IsZero() {
			buf = append(buf, 0)
		} else {
			buf = binary.AppendUvarint(buf, uint64(d.moveRef.Partition)+1)
			buf = binary.AppendUvarint(buf, d.moveRef.Offset)
		}
		buf = binary.AppendUvarint(buf, d.moves)
	}
	l.mu.Unlock()
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	return fsutil.WriteFileAtomic(filepath.Join(l.dir, checkpointFile), buf, 0o640)
}

// loadCheckpoint reads the checkpoint; a missing one is not an error (found
// false), a damaged one is logged by the caller and ignored: the scan then starts
// at the front of every partition.
func loadCheckpoint(dir string, nparts, max int) (t *deviceTable, covered []uint64, found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return newDeviceTable(max), make([]uint64, nparts), false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("wal: read device checkpoint: %w", err)
	}
	t, covered, err = decodeCheckpoint(data, nparts, max)
	if err != nil {
		return newDeviceTable(max), make([]uint64, nparts), false, fmt.Errorf("wal: device checkpoint: %w", err)
	}
	return t, covered, true, nil
}

func decodeCheckpoint(data []byte, nparts, max int) (*deviceTable, []uint64, error) {
	if len(data) < len(checkpointMagic)+4 || !bytes.HasPrefix(data, checkpointMagic) {
		return nil, nil, errors.New("bad magic")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, nil, errors.New("checksum mismatch")
	}
	d := decoder{b: body[len(checkpointMagic):]}
	if n := d.uvarint(); n != uint64(nparts) {
		return nil, nil, fmt.Errorf("written for %d partitions, log has %d", n, nparts)
	}
	covered := make([]uint64, nparts)
	for i := range covered {
		covered[i] = d.uvarint()
	}
	n := d.uvarint()
	if n > uint64(max) {
		return nil, nil, fmt.Errorf("%d devices, max_devices is %d", n, max)
	}
	t := newDeviceTable(max)
	for i := uint64(0); i < n && d.err == nil; i++ {
		id := strings.Clone(d.str(MaxDeviceIDLen))
		st := &deviceState{lastSeq: d.uvarint(), partition: int(d.uvarint())}
		if p := d.uvarint(); p > 0 {
			st.moveRef = Ref{Partition: int(p - 1), Offset: d.uvarint()}
		}
		st.moves = d.uvarint()
		if st.partition >= nparts || st.moveRef.Partition >= nparts {
			return nil, nil, fmt.Errorf("device %q: partition out of range", id)
		}
		t.m[id] = st
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return t, covered, nil
}

// recoverDevices rebuilds the device table: the checkpoint, then every record
// written after it. It returns the table, whether a checkpoint was used and how
// many records were scanned.
func recoverDevices(dir string, parts []*partition, max int, logger *slog.Logger) (*deviceTable, bool, uint64, error) {
	t, covered, found, err := loadCheckpoint(dir, len(parts), max)
	if err != nil && t == nil {
		return nil, false, 0, err
	}
	if err != nil {
		logger.Warn("ignoring damaged device checkpoint; scanning the whole log", "err", err)
	}
	var scanned uint64
	for i, p := range parts {
		from := covered[i] + 1
		// A checkpoint may cover records a power cut took back: rescan from
		// the end of what survived, so that what is written next is seen.
		if last := p.last.Load(); from > last+1 {
			from = last + 1
		}
		n, err := scanPartition(p.dir, from, func(off uint64, rec *Record) error {
			return t.replay(i, off, rec, len(parts))
		})
		scanned += n
		if err != nil {
			return nil, false, scanned, fmt.Errorf("wal: rebuild device table from partition %d: %w", i, err)
		}
	}
	return t, found, scanned, nil
}

// replay applies one stored record to the table.
func (t *deviceTable) replay(p int, off uint64, rec *Record, nparts int) error {
	d, ok := t.m[rec.Device]
	if !ok {
		if len(t.m) >= t.max {
			return fmt.Errorf("%w: %d devices", ErrTooManyDevices, t.max)
		}
		d = &deviceState{partition: -1}
		t.m[strings.Clone(rec.Device)] = d
	}
	switch rec.Kind {
	case KindData:
		d.lastSeq = max(d.lastSeq, rec.Seq)
		if d.partition < 0 {
			d.partition, d.moveRef = p, rec.MoveRef
		}
	case KindMove:
		moves, _ := binary.Uvarint(rec.Payload)
		if moves > d.moves && rec.MoveTarget < nparts {
			d.moves, d.partition, d.moveRef = moves, rec.MoveTarget, Ref{Partition: p, Offset: off}
		}
		d.lastSeq = max(d.lastSeq, rec.Seq)
		if d.partition < 0 {
			d.partition = p
		}
	}
	return nil
}

// scanPartition decodes every record at offset >= from straight from the
// segment files (no tidwall cache), skipping records whose CRC fails.
func scanPartition(dir string, from uint64, fn func(off uint64, rec *Record) error) (uint64, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return 0, err
	}
	var n uint64
	var rec Record
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].first <= from {
			continue
		}
		data, err := readFile(s.path)
		if err != nil {
			return n, err
		}
		var ferr error
		scanFrames(data, math.MaxUint64, func(k uint64, frame []byte) {
			off := s.first + k
			if off < from || ferr != nil || DecodeRecord(frame, &rec) != nil {
				return
			}
			n++
			ferr = fn(off, &rec)
		})
		if ferr != nil {
			return n, ferr
		}
	}
	return n, nil
}

func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read segment: %w", err)
	}
	return data, nil
}
