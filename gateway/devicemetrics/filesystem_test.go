package devicemetrics

import (
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAppendFilesystemSamples(t *testing.T) {
	tests := []struct {
		name string
		st   unix.Statfs_t
		want string
	}{
		{
			name: "fragment size is the unit",
			st:   unix.Statfs_t{Bsize: 1 << 20, Frsize: 4096, Blocks: 1000, Bfree: 300, Bavail: 250},
			want: `gauge edgeq_device_filesystem_size_bytes 4096000
gauge edgeq_device_filesystem_free_bytes 1228800
gauge edgeq_device_filesystem_avail_bytes 1024000
`,
		},
		{
			name: "block size when fragment size is 0",
			st:   unix.Statfs_t{Bsize: 512, Blocks: 10, Bfree: 4, Bavail: 2},
			want: `gauge edgeq_device_filesystem_size_bytes 5120
gauge edgeq_device_filesystem_free_bytes 2048
gauge edgeq_device_filesystem_avail_bytes 1024
`,
		},
		{
			name: "full disk",
			st:   unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 10, Bfree: 1, Bavail: 0},
			want: `gauge edgeq_device_filesystem_size_bytes 40960
gauge edgeq_device_filesystem_free_bytes 4096
gauge edgeq_device_filesystem_avail_bytes 0
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertRendered(t, appendFilesystemSamples(nil, &tt.st), tt.want)
		})
	}
}

func TestFilesystemCollector(t *testing.T) {
	t.Run("real statfs of a temp dir", func(t *testing.T) {
		got := collectOK(t, filesystemCollector{dataDir: t.TempDir(), statfs: unix.Statfs})
		size, avail := named(got, "edgeq_device_filesystem_size_bytes"), named(got, "edgeq_device_filesystem_avail_bytes")
		if len(size) != 1 || len(avail) != 1 || size[0].Value <= 0 || avail[0].Value > size[0].Value {
			t.Fatalf("implausible filesystem samples: %v", got)
		}
	})
	t.Run("missing data dir fails with ENOENT", func(t *testing.T) {
		_, err := filesystemCollector{dataDir: filepath.Join(t.TempDir(), "nope"), statfs: unix.Statfs}.Collect(nil)
		if !errors.Is(err, unix.ENOENT) {
			t.Fatalf("err = %v, want ENOENT", err)
		}
	})
}
