package wal

import (
	"fmt"
	"testing"
)

func TestDeviceTail(t *testing.T) {
	o := testOptions()
	l := openTest(t, t.TempDir(), o)
	defer l.Close()
	// Two devices on one partition, interleaved: quiet writes 5, busy 1000.
	quiet := "quiet-1"
	p := PartitionFor(quiet, o.Partitions)
	busy := ""
	for i := 0; busy == ""; i++ {
		if d := fmt.Sprintf("busy-%d", i); PartitionFor(d, o.Partitions) == p {
			busy = d
		}
	}
	appendN(t, l, quiet, 3)
	appendN(t, l, busy, 1000)
	appendN(t, l, quiet, 2)
	appendN(t, l, busy, 10)

	info, ok := l.Device(quiet)
	if !ok || info.LastSeq != 5 || info.Partition != p || info.Home != p || info.Moves != 0 {
		t.Fatalf("Device(%s) = %+v, %v", quiet, info, ok)
	}
	if _, ok := l.Device("never-seen"); ok {
		t.Fatal("unknown device found")
	}
	tests := []struct {
		name         string
		device       string
		n, maxBytes  int
		wantSeqs     []uint64
		wantComplete bool
	}{
		{"newest three", quiet, 3, 1 << 20, []uint64{3, 4, 5}, true},
		{"all of it", quiet, 50, 1 << 20, []uint64{1, 2, 3, 4, 5}, true},
		{"busy newest", busy, 2, 1 << 20, []uint64{1009, 1010}, true},
		// The budget covers the last busy records only: the older quiet
		// records are not reached.
		{"budget", quiet, 5, 2000, []uint64{4, 5}, false},
		{"unknown", "nobody", 3, 1 << 20, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, scan, err := l.DeviceTail(p, tt.device, tt.n, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, e := range got {
				if e.Record.Device != tt.device {
					t.Fatalf("record of %s", e.Record.Device)
				}
				seqs = append(seqs, e.Record.Seq)
			}
			if fmt.Sprint(seqs) != fmt.Sprint(tt.wantSeqs) || scan.Complete != tt.wantComplete {
				t.Fatalf("seqs %v complete %v (scan %+v), want %v %v", seqs, scan.Complete, scan, tt.wantSeqs, tt.wantComplete)
			}
			if scan.Bytes > tt.maxBytes+300 {
				t.Fatalf("scanned %d bytes, budget %d", scan.Bytes, tt.maxBytes)
			}
		})
	}
	if _, _, err := l.DeviceTail(99, quiet, 1, 100); err == nil {
		t.Fatal("bad partition accepted")
	}
	if _, _, err := l.DeviceTail(p, quiet, 0, 100); err == nil {
		t.Fatal("n 0 accepted")
	}
}
