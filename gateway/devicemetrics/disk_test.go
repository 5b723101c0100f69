package devicemetrics

import (
	"errors"
	"strings"
	"testing"
)

func TestDiskOfDevice(t *testing.T) {
	// testdata/sys/dev/block links 179:0..2 to mmcblk0 and its partitions,
	// and 252:0 to zram0.
	tests := []struct {
		major, minor uint32
		want         string
		wantErr      error
	}{
		{major: 179, minor: 2, want: "mmcblk0"}, // partition -> its disk
		{major: 179, minor: 1, want: "mmcblk0"},
		{major: 179, minor: 0, want: "mmcblk0"}, // whole disk
		{major: 252, minor: 0, want: "zram0"},
		{major: 8, minor: 0, wantErr: ErrNoBlockDevice},  // not in sysfs
		{major: 0, minor: 45, wantErr: ErrNoBlockDevice}, // overlayfs, tmpfs, btrfs subvolume
	}
	for _, tt := range tests {
		got, err := diskOfDevice(fixtureSys, tt.major, tt.minor)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%d:%d: err = %v, want %v", tt.major, tt.minor, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%d:%d: got %q, %v; want %q", tt.major, tt.minor, got, err, tt.want)
		}
	}
}

func TestDiskCollectorOnFixture(t *testing.T) {
	// The mmcblk0 line of testdata/proc/diskstats: 48210 reads, 3125886
	// sectors read, 61230 ms reading, 93120 writes, 5120480 sectors written,
	// 912345 ms writing, 0 in progress, 402310 ms busy.
	c := diskCollector{procRoot: fixtureProc, sysRoot: fixtureSys, dataDir: fixtureDataDir,
		deviceOf: func(string) (uint32, uint32, error) { return 179, 2, nil }}
	assertRendered(t, collectOK(t, c), `counter edgeq_device_disk_reads_completed_total{device="mmcblk0"} 48210
counter edgeq_device_disk_writes_completed_total{device="mmcblk0"} 93120
counter edgeq_device_disk_read_bytes_total{device="mmcblk0"} 1600453632
counter edgeq_device_disk_written_bytes_total{device="mmcblk0"} 2621685760
counter edgeq_device_disk_read_time_seconds_total{device="mmcblk0"} 61.23
counter edgeq_device_disk_write_time_seconds_total{device="mmcblk0"} 912.345
counter edgeq_device_disk_io_time_seconds_total{device="mmcblk0"} 402.31
gauge edgeq_device_disk_io_now{device="mmcblk0"} 0
`)
}

func TestDiskCollectorFailures(t *testing.T) {
	statErr := errors.New("stat failed")
	tests := []struct {
		name     string
		deviceOf func(string) (uint32, uint32, error)
		wantErr  error
		wantText string
	}{
		{name: "stat of the data dir fails", deviceOf: func(string) (uint32, uint32, error) { return 0, 0, statErr }, wantErr: statErr},
		{name: "no block device", deviceOf: func(string) (uint32, uint32, error) { return 0, 31, nil }, wantErr: ErrNoBlockDevice},
		{name: "disk missing from diskstats", deviceOf: func(string) (uint32, uint32, error) { return 252, 0, nil }, wantText: "zram0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := diskCollector{procRoot: fixtureProc, sysRoot: fixtureSys, dataDir: fixtureDataDir, deviceOf: tt.deviceOf}
			_, err := c.Collect(nil)
			if err == nil {
				t.Fatal("Collect succeeded")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %v, want it to mention %q", err, tt.wantText)
			}
		})
	}
}
