package devicemetrics

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	fixtureProc       = "testdata/proc"
	fixtureProcBroken = "testdata/proc-broken"
	fixtureSys        = "testdata/sys"
	fixturePID        = 4242
	fixturePageSize   = 4096
	fixtureDataDir    = "/var/lib/edgeq" // never touched: statfs and stat are faked
)

// fixtureConfig points every collector at the fake Raspberry Pi 4 under
// testdata.
func fixtureConfig() Config {
	return Config{
		ProcRoot: fixtureProc,
		SysRoot:  fixtureSys,
		DataDir:  fixtureDataDir,
		PID:      fixturePID,
	}.withDefaults()
}

// fixtureSystem fakes the calls that would read this machine: the data dir
// is on /dev/mmcblk0p2 (179:2), a 32 GB card.
func fixtureSystem() system {
	return system{
		statfs: func(path string, st *unix.Statfs_t) error {
			*st = unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: 7_500_000, Bfree: 5_000_000, Bavail: 4_600_000}
			return nil
		},
		deviceOf: func(path string) (uint32, uint32, error) { return 179, 2, nil },
		pageSize: fixturePageSize,
	}
}

func collectOK(t *testing.T, c Collector) []Sample {
	t.Helper()
	got, err := c.Collect(nil)
	if err != nil {
		t.Fatalf("%s: Collect: %v", c.Name(), err)
	}
	return got
}

// render gives one line per sample, for comparing whole outputs.
func render(samples []Sample) string {
	var b strings.Builder
	for _, s := range samples {
		b.WriteString(s.Type.String())
		b.WriteByte(' ')
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func assertRendered(t *testing.T, got []Sample, want string) {
	t.Helper()
	if g := render(got); g != want {
		t.Errorf("samples differ\n got:\n%s\nwant:\n%s", g, want)
	}
}

func named(samples []Sample, name string) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// success returns the edgeq_collector_success value per collector.
func success(samples []Sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range named(samples, successName) {
		c, _ := s.Label("collector")
		out[c] = s.Value
	}
	return out
}
