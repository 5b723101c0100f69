package wal

import (
	"context"
	"encoding/binary"
	"fmt"
)

// HomePartition is the normal partition a device hashes to.
func (l *Log) HomePartition(device string) int { return PartitionFor(device, l.opts.Partitions) }

// HotPartition is the isolation partition a hot device moves to, or -1 when
// the log has no hot partitions.
func (l *Log) HotPartition(device string) int {
	if l.opts.HotPartitions == 0 {
		return -1
	}
	return l.opts.Partitions + PartitionFor(device, l.opts.HotPartitions)
}

// DevicePartition returns the partition the device's next record goes to.
func (l *Log) DevicePartition(device string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.devices.m[device]; ok {
		return d.partition
	}
	return l.HomePartition(device)
}

// Move sends the device's following records to partition target. It appends a
// move marker to the device's current partition and waits until the marker is
// durable; records after it carry the marker's position, so a consumer never
// delivers them before it has passed the marker. Appends of all devices wait
// while the marker is written (moves are rare: hot-device isolation). Moving a
// device to where it already is does nothing and returns its current position.
func (l *Log) Move(ctx context.Context, device string, target int) (Position, error) {
	if err := ValidateDeviceID(device); err != nil {
		return Position{}, err
	}
	if target < 0 || target >= len(l.parts) {
		return Position{}, fmt.Errorf("%w: move target %d", ErrBadPartition, target)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Position{}, ErrClosed
	}
	d, err := l.devices.get(device, l.opts.Partitions)
	if err != nil {
		return Position{}, err
	}
	if d.partition == target {
		return Position{Partition: target, Seq: d.lastSeq}, nil
	}
	var payload [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(payload[:], d.moves+1)
	marker := &Record{Kind: KindMove, Device: device, MoveTarget: target, Source: "edgeq", Payload: payload[:n]}
	r := getReq()
	r.rec, r.kind, r.seq, r.moveRef = marker, KindMove, d.lastSeq, d.moveRef
	r.time = l.opts.Now().UnixNano()
	select {
	case l.parts[d.partition].reqs <- r:
	case <-ctx.Done():
		putReq(r)
		return Position{}, ctx.Err()
	}
	// Wait for the writer even if ctx ends: a marker that lands while the route
	// stays unchanged would confuse recovery. The writer always answers.
	<-r.done
	pos, err := r.pos, r.err
	putReq(r)
	if err != nil {
		return Position{}, fmt.Errorf("wal: move %s to partition %d: %w", device, target, err)
	}
	d.moves++
	d.partition = target
	d.moveRef = Ref{Partition: pos.Partition, Offset: pos.Offset}
	return pos, nil
}

// IsolatedDevices lists the devices currently routed to a hot partition, with
// their home partitions (for the hot detector after a restart).
func (l *Log) IsolatedDevices() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for id, d := range l.devices.m {
		if d.partition >= l.opts.Partitions {
			out[id] = l.HomePartition(id)
		}
	}
	return out
}
