package devicemetrics

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// diskCollector reports the I/O of the block device that holds the data
// directory. The device comes from the directory's st_dev, resolved through
// <sys>/dev/block/MAJ:MIN; a partition (mmcblk0p2) is reported as its whole
// disk (mmcblk0), whose /proc/diskstats line carries all the I/O that
// competes with the WAL's fsyncs on the same SD card or SSD.
type diskCollector struct {
	procRoot, sysRoot string
	dataDir           string
	deviceOf          func(path string) (major, minor uint32, err error)
}

var _ Collector = diskCollector{}

func (diskCollector) Name() string { return "disk" }

// ErrNoBlockDevice is returned when the data directory is on a filesystem
// without a block device of its own: tmpfs, overlayfs (containers), NFS,
// btrfs subvolumes (anonymous device numbers, major 0).
var ErrNoBlockDevice = errors.New("data directory has no block device")

// diskSectorBytes is the unit of diskstats sector counts: always 512,
// whatever the device's real sector size.
const diskSectorBytes = 512

func (c diskCollector) Collect(dst []Sample) ([]Sample, error) {
	major, minor, err := c.deviceOf(c.dataDir)
	if err != nil {
		return dst, err
	}
	disk, err := diskOfDevice(c.sysRoot, major, minor)
	if err != nil {
		return dst, fmt.Errorf("data dir %s: %w", c.dataDir, err)
	}
	fs, err := blockdevice.NewFS(c.procRoot, c.sysRoot)
	if err != nil {
		return dst, fmt.Errorf("open block device fs at %s and %s: %w", c.procRoot, c.sysRoot, err)
	}
	stats, err := fs.ProcDiskstats()
	if err != nil {
		return dst, fmt.Errorf("read diskstats: %w", err)
	}
	for _, s := range stats {
		if s.DeviceName == disk {
			return appendDiskSamples(dst, disk, s.IOStats), nil
		}
	}
	return dst, fmt.Errorf("disk %s of data dir %s is not in %s", disk, c.dataDir, filepath.Join(c.procRoot, "diskstats"))
}

func appendDiskSamples(dst []Sample, disk string, s blockdevice.IOStats) []Sample {
	device := Label{"device", disk}
	return append(dst,
		counter("edgeq_device_disk_reads_completed_total", "Reads completed by the data directory's disk.", float64(s.ReadIOs), device),
		counter("edgeq_device_disk_writes_completed_total", "Writes completed by the data directory's disk.", float64(s.WriteIOs), device),
		counter("edgeq_device_disk_read_bytes_total", "Bytes read from the data directory's disk.", float64(s.ReadSectors)*diskSectorBytes, device),
		counter("edgeq_device_disk_written_bytes_total", "Bytes written to the data directory's disk.", float64(s.WriteSectors)*diskSectorBytes, device),
		counter("edgeq_device_disk_read_time_seconds_total", "Seconds spent by all reads of the data directory's disk.", float64(s.ReadTicks)/1000, device),
		counter("edgeq_device_disk_write_time_seconds_total", "Seconds spent by all writes of the data directory's disk.", float64(s.WriteTicks)/1000, device),
		counter("edgeq_device_disk_io_time_seconds_total", "Seconds the data directory's disk was busy with I/O.", float64(s.IOsTotalTicks)/1000, device),
		gauge("edgeq_device_disk_io_now", "I/Os in progress on the data directory's disk.", float64(s.IOsInProgress), device),
	)
}

// diskOfDevice names the whole disk holding device major:minor, e.g.
// 179:2 -> mmcblk0. <sys>/dev/block/MAJ:MIN links to the device's directory;
// a partition's directory has a "partition" file and sits inside its disk's.
func diskOfDevice(sysRoot string, major, minor uint32) (string, error) {
	if major == 0 {
		return "", fmt.Errorf("%w: device %d:%d is anonymous", ErrNoBlockDevice, major, minor)
	}
	link := filepath.Join(sysRoot, "dev", "block", strconv.FormatUint(uint64(major), 10)+":"+strconv.FormatUint(uint64(minor), 10))
	target, err := os.Readlink(link)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: no %s", ErrNoBlockDevice, link)
		}
		return "", fmt.Errorf("resolve block device: %w", err)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(link), target)
	}
	_, err = os.Stat(filepath.Join(target, "partition"))
	switch {
	case err == nil:
		return filepath.Base(filepath.Dir(target)), nil
	case errors.Is(err, os.ErrNotExist):
		return filepath.Base(target), nil
	default:
		return "", fmt.Errorf("check whether %s is a partition: %w", target, err)
	}
}

// deviceNumberOf returns the major and minor number of the device holding
// path.
func deviceNumberOf(path string) (major, minor uint32, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("stat data dir %s: %w", path, err)
	}
	dev := uint64(st.Dev) // Dev is uint32 on some ports (mips)
	return unix.Major(dev), unix.Minor(dev), nil
}
