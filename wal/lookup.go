package wal

import "fmt"

// DeviceInfo is what the log knows of one device.
type DeviceInfo struct {
	LastSeq   uint64 // the device's last sequence number on this node
	Partition int    // where its next record goes
	Home      int    // the normal partition it hashes to
	Moves     uint64 // hot-isolation moves so far
}

// Device returns what the log knows of device; false when it never stored
// a record of it.
func (l *Log) Device(device string) (DeviceInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.devices.m[device]
	if !ok {
		return DeviceInfo{}, false
	}
	return DeviceInfo{LastSeq: d.lastSeq, Partition: d.partition, Home: l.HomePartition(device), Moves: d.moves}, true
}

// TailScan says how much of a partition DeviceTail read.
type TailScan struct {
	Records  int  // records read
	Bytes    int  // their encoded size
	Complete bool // reached the partition's first record (or found n)
}

// tailChunk is how many records DeviceTail reads per Read: each Read holds
// the partition's read lock, which delivery shares, so it stays short.
const tailChunk = 256

// DeviceTail returns up to n of device's newest durable records in partition
// p (data records and move markers), oldest first. It reads back from the
// durable mark in chunks and stops once it found n or has read about
// maxBytes: a device that publishes rarely on a busy partition may not be
// found within the budget (TailScan.Complete is false then).
func (l *Log) DeviceTail(p int, device string, n, maxBytes int) ([]Entry, TailScan, error) {
	var scan TailScan
	if _, err := l.part(p); err != nil {
		return nil, scan, err
	}
	if n <= 0 || maxBytes <= 0 {
		return nil, scan, fmt.Errorf("wal: device tail: n %d and maxBytes %d must be positive", n, maxBytes)
	}
	hi := l.Durable(p)
	var found []Entry
	chunk := uint64(8) // the first chunk: the newest records, small
	for hi >= 1 && len(found) < n && scan.Bytes < maxBytes {
		first := max(l.First(p), 1)
		if hi < first {
			scan.Complete = true
			break
		}
		from := first
		if hi-first+1 > chunk {
			from = hi - chunk + 1
		}
		// Read forward over [from, hi]. Read stops early on its byte bound:
		// a chunk cut short by the budget is dropped, so that what is
		// returned is the device's records of one contiguous newest range.
		var matches []Entry
		off := from
		for off <= hi && scan.Bytes < maxBytes {
			b, err := l.Read(p, off, int(hi-off+1), maxBytes-scan.Bytes)
			if err != nil {
				return nil, scan, err
			}
			if b.Next <= off {
				break // nothing there any more (retention)
			}
			for _, e := range b.Entries {
				if e.Offset > hi {
					break
				}
				scan.Records++
				scan.Bytes += len(e.Raw)
				if e.Record.Device == device {
					matches = append(matches, e)
				}
			}
			off = b.Next
		}
		if off <= hi {
			break
		}
		found = append(matches, found...)
		if from <= first {
			scan.Complete = true
			break
		}
		hi = from - 1
		// Size the next chunk to the budget left at the average record size.
		avg := max(scan.Bytes/max(scan.Records, 1), 1)
		chunk = uint64(min(max((maxBytes-scan.Bytes)/avg, 1), tailChunk))
	}
	if len(found) >= n {
		scan.Complete = true
		found = found[len(found)-n:]
	}
	return found, scan, nil
}
