package wal

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/partition_vectors.txt")

// The vectors are part of the on-disk format: a device must land in the same
// partition on amd64, arm64 and arm v7, before and after an upgrade.
const vectorsFile = "testdata/partition_vectors.txt"

func vectorDevices() []string {
	ids := []string{"a", "A", "0", "sensor-1", "sensor-2", "plant1:line3:temp", "user@site", "x_y-z",
		strings.Repeat("z", 128), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"}
	for i := 0; i < 40; i++ {
		ids = append(ids, fmt.Sprintf("dev-%d", i*7919))
	}
	return ids
}

func TestPartitionVectors(t *testing.T) {
	if *updateVectors {
		var b strings.Builder
		b.WriteString("# device xxhash64(seed) partition/8 partition/10 partition/2\n")
		for _, d := range vectorDevices() {
			fmt.Fprintf(&b, "%s %016x %d %d %d\n", d, DeviceHash(d), PartitionFor(d, 8), PartitionFor(d, 10), PartitionFor(d, 2))
		}
		os.MkdirAll(filepath.Dir(vectorsFile), 0o750)
		if err := os.WriteFile(vectorsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 5 {
			t.Fatalf("bad vector line %q", line)
		}
		h, _ := strconv.ParseUint(fs[1], 16, 64)
		p8, _ := strconv.Atoi(fs[2])
		p10, _ := strconv.Atoi(fs[3])
		p2, _ := strconv.Atoi(fs[4])
		if DeviceHash(fs[0]) != h || PartitionFor(fs[0], 8) != p8 || PartitionFor(fs[0], 10) != p10 || PartitionFor(fs[0], 2) != p2 {
			t.Errorf("%s: hash %016x p8 %d p10 %d p2 %d, vectors say %s", fs[0], DeviceHash(fs[0]),
				PartitionFor(fs[0], 8), PartitionFor(fs[0], 10), PartitionFor(fs[0], 2), line)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("only %d vectors", n)
	}
}

func TestPartitionSpread(t *testing.T) {
	counts := make([]int, 8)
	for i := 0; i < 8000; i++ {
		counts[PartitionFor(fmt.Sprintf("sensor-%d", i), 8)]++
	}
	for p, c := range counts {
		if c < 800 || c > 1200 {
			t.Fatalf("partition %d got %d of 8000 devices: %v", p, c, counts)
		}
	}
}
