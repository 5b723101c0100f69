package wal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions() Options {
	o := DefaultOptions()
	o.Partitions = 4
	o.HotPartitions = 1
	o.SegmentSize = 64 << 10
	o.Durability = DurabilityAlways
	o.RetentionInterval = time.Hour
	o.CheckpointInterval = time.Hour
	return o
}

func openTest(t testing.TB, dir string, o Options) *Log {
	t.Helper()
	l, err := Open(dir, o, quietLogger())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func appendN(t testing.TB, l *Log, device string, n int) []Position {
	t.Helper()
	var out []Position
	for i := 0; i < n; i++ {
		pos, err := l.Append(context.Background(), &Record{Device: device, Source: "test", Payload: payloadFor(device, i)})
		if err != nil {
			t.Fatalf("append %s #%d: %v", device, i, err)
		}
		out = append(out, pos)
	}
	return out
}

// readAll reads every durable record of partition p.
func readAll(t testing.TB, l *Log, p int) []Entry {
	t.Helper()
	var out []Entry
	from := uint64(1)
	for {
		b, err := l.Read(p, from, 100, 1<<20)
		if err != nil {
			t.Fatalf("read partition %d from %d: %v", p, from, err)
		}
		out = append(out, b.Entries...)
		if b.Next == from {
			return out
		}
		from = b.Next
	}
}

func removeFile(dir, name string) error { return os.Remove(filepath.Join(dir, name)) }

// payloadFor is the test payload of a device's i-th record: unique, delimited
// (so a search for one never matches another) and large enough that a few
// hundred records span several 64 KiB segments.
func payloadFor(device string, i int) []byte {
	return []byte(fmt.Sprintf("<%s-%d>%0120d", device, i, i))
}
