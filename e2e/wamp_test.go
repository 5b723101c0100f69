package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
)

// TestWriteAmplification measures what the node writes per byte of telemetry
// payload at steady state: the real binary at a steady pub-acked rate over
// 1,000 devices, one queue group acking everything (offset commits) and
// retention removing segments all along. It reports two figures per payload
// byte:
//   - node: /proc/<pid>/io write_bytes, what the node made the kernel write
//     (page-granular: a 4 KiB tail page rewritten after each fsync counts
//     each time);
//   - device: sectors written to a dedicated ext4 loop disk holding the data
//     directory (mkfs.ext4 on a file, losetup, mount), journal and metadata
//     included, when the machine allows it (root, /dev/loop-control,
//     mkfs.ext4); otherwise only the node figure.
//
// It is a measurement, not a check, and runs only with EDGEQ_E2E_WAMP set to
// the length of each measurement window (make wamp). Parameters:
//
//	EDGEQ_E2E_WAMP_PAYLOADS    payload sizes in bytes (default 100,1024)
//	EDGEQ_E2E_WAMP_PARTITIONS  wal.partitions (default 1,8)
//	EDGEQ_E2E_WAMP_INTERVALS   wal.fsync_interval (default: the default, 10ms)
//	EDGEQ_E2E_WAMP_WAL         more wal keys, e.g. commit_bytes=1MiB,durability=always
//	EDGEQ_E2E_WAMP_RATE        msg/s (default 2000)
//	EDGEQ_E2E_WAMP_SEGMENT     wal.segment_size (default 1MiB, as in the figures; the node's own default is 512KiB);
//	                           max_bytes is four segments per partition
//	EDGEQ_E2E_WAMP_LOOP        0: do not use a loop disk
//	EDGEQ_E2E_BIN              the node binary to measure (e.g. an older build)
func TestWriteAmplification(t *testing.T) {
	window, err := time.ParseDuration(os.Getenv("EDGEQ_E2E_WAMP"))
	if err != nil || window <= 0 {
		t.Skip("set EDGEQ_E2E_WAMP to a duration (make wamp)")
	}
	payloads := envList("EDGEQ_E2E_WAMP_PAYLOADS", "100,1024")
	partitions := envList("EDGEQ_E2E_WAMP_PARTITIONS", "1,8")
	intervals := envList("EDGEQ_E2E_WAMP_INTERVALS", "")
	extra := os.Getenv("EDGEQ_E2E_WAMP_WAL")
	var rows []string
	for _, iv := range intervals {
		for _, ps := range payloads {
			for _, parts := range partitions {
				size, err1 := strconv.Atoi(ps)
				np, err2 := strconv.Atoi(parts)
				if err1 != nil || err2 != nil || size < 20 || np < 1 {
					t.Fatalf("bad payload size %q or partitions %q", ps, parts)
				}
				name := fmt.Sprintf("payload=%d/partitions=%d", size, np)
				if iv != "" {
					name += "/fsync_interval=" + iv
				}
				t.Run(name, func(t *testing.T) {
					r := measureWAMP(t, wampCase{payload: size, partitions: np, interval: iv, extra: extra, window: window})
					rows = append(rows, fmt.Sprintf("| %d B | %d | %s | %s | %.0f msg/s | %s | %s |", size, np, or(iv, "10ms"), or(extra, "-"),
						r.rate, ratio(r.node), ratio(r.device)))
				})
			}
		}
	}
	t.Logf("write amplification (bytes written per payload byte), windows of %v:\n"+
		"| payload | partitions | fsync_interval | other wal keys | pub-acked | node | device |\n|---|---|---|---|---|---|---|\n%s",
		window, strings.Join(rows, "\n"))
}

type wampCase struct {
	payload, partitions int
	interval, extra     string
	window              time.Duration
}

type wampResult struct {
	rate         float64
	node, device float64 // <0: not measured
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func ratio(x float64) string {
	if x < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", x)
}

func measureWAMP(t *testing.T, c wampCase) wampResult {
	rate := envInt("EDGEQ_E2E_WAMP_RATE", 2000)
	const devices = 1000
	// A budget of four segments per partition: retention removes segments
	// all through the window.
	seg := or(os.Getenv("EDGEQ_E2E_WAMP_SEGMENT"), "1MiB")
	segKiB := 1024
	if v, ok := strings.CutSuffix(seg, "KiB"); ok {
		segKiB, _ = strconv.Atoi(v)
	} else if v, ok := strings.CutSuffix(seg, "MiB"); ok {
		m, _ := strconv.Atoi(v)
		segKiB = m << 10
	}
	if segKiB < 64 {
		t.Fatalf("EDGEQ_E2E_WAMP_SEGMENT=%q: want NKiB or NMiB, at least 64KiB", seg)
	}
	cfg := fmt.Sprintf("wal:\n  partitions: %d\n  segment_size: %dKiB\n  max_bytes: %dKiB\n", c.partitions, segKiB, 4*segKiB*c.partitions)
	if c.interval != "" {
		cfg += "  fsync_interval: " + c.interval + "\n"
	}
	for _, kv := range strings.Split(c.extra, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			cfg += fmt.Sprintf("  %s: %s\n", strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	cfg += "groups:\n  - {subject: telemetry.>, queue: workers, deliver: all}\n"
	// The disk first: cleanups run last-registered first, so the node is
	// killed before the disk is unmounted.
	disk := wampLoopDisk(t)
	n := newNode(t, cfg)
	if disk != nil {
		n.dataDir = filepath.Join(disk.mnt, "data")
	}
	n.start()
	pid := n.cmd.Process.Pid

	// A group that acks everything.
	wc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	var delivered atomic.Int64
	if _, err := wc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
		delivered.Add(1)
		m.Ack()
	}); err != nil {
		t.Fatal(err)
	}

	// Publisher: pub-acked requests paced to rate; enough outstanding that
	// acks waiting for a long fsync_interval do not hold the rate down.
	pc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var acked, failed atomic.Int64
	outstanding := make(chan struct{}, 8*rate)
	inbox := nats.NewInbox()
	if _, err := pc.Subscribe(inbox+".*", func(m *nats.Msg) {
		<-outstanding
		if strings.Contains(string(m.Data), `"error"`) {
			failed.Add(1)
			return
		}
		acked.Add(1)
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		pad := strings.Repeat("p", c.payload-15)
		start, sent := time.Now(), 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for due := int(time.Since(start).Seconds()*float64(rate)) - sent; due > 0; due-- {
				select {
				case outstanding <- struct{}{}:
				case <-stop:
					return
				}
				dev := sent % devices
				m := &nats.Msg{Subject: fmt.Sprintf("telemetry.dev-%04d", dev), Reply: fmt.Sprintf("%s.%d", inbox, sent),
					Data: []byte(fmt.Sprintf("%04d|%09d|%s", dev, sent, pad))}
				if err := pc.PublishMsg(m); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				sent++
			}
		}
	}()
	defer func() {
		close(stop)
		<-pubDone
	}()

	// Warm up until retention has removed segments of every partition.
	walDir := filepath.Join(n.dataDir, "wal")
	firsts := func() []uint64 {
		out := make([]uint64, c.partitions)
		for p := range out {
			ents, _ := os.ReadDir(filepath.Join(walDir, fmt.Sprintf("p%03d", p)))
			for _, e := range ents {
				if v, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 && (out[p] == 0 || v < out[p]) {
					out[p] = v
				}
			}
		}
		return out
	}
	waitFor(t, "retention to remove segments of every partition", 10*time.Minute, func() bool {
		for _, f := range firsts() {
			if f <= 1 {
				return false
			}
		}
		return true
	})

	type sample struct {
		at                       time.Time
		writeBytes, sectors      int64
		acked                    int64
		appended                 int64 // records written to the log (to the OS)
		rounds, fsyncs, removed  float64
		journalTx, journalBlocks int64
		firsts                   []uint64
	}
	take := func() sample {
		if disk != nil {
			disk.syncfs(t)
		}
		s := sample{at: time.Now(), acked: acked.Load(), firsts: firsts(),
			appended: int64(metricSum(t, n, "edgeq_log_appends_total"))}
		s.writeBytes, _ = procIO(t, pid)
		if disk != nil {
			s.sectors = disk.sectorsWritten(t)
			s.journalTx, s.journalBlocks = disk.journal()
		}
		s.rounds = metricValue(t, n, "edgeq_wal_commit_rounds_total")
		s.fsyncs = metricValue(t, n, "edgeq_wal_fsyncs_total")
		return s
	}
	a := take()
	time.Sleep(c.window)
	b := take()
	if !n.running() {
		t.Fatalf("node exited: %s", n.logs())
	}
	secs := b.at.Sub(a.at).Seconds()
	// Per payload byte written to the log in the window: counted when the
	// records are written, like write_bytes (acks come a round later, and
	// after a stall a burst of them would skew a short window).
	payload := float64((b.appended - a.appended) * int64(c.payload))
	if payload <= 0 {
		t.Fatalf("nothing appended in %v", c.window)
	}
	res := wampResult{rate: float64(b.acked-a.acked) / secs, node: float64(b.writeBytes-a.writeBytes) / payload, device: -1}
	journal := "n/a"
	if disk != nil {
		res.device = float64(b.sectors-a.sectors) * 512 / payload
		if tx := b.journalTx - a.journalTx; tx > 0 && b.journalBlocks > 0 {
			// The average is over the file system's life: about right.
			journal = fmt.Sprintf("%.2f× (%d commits of ~%d blocks)", float64(tx*b.journalBlocks*4096)/payload, tx, b.journalBlocks)
		}
	}
	removed := 0
	for p := range a.firsts {
		if b.firsts[p] > a.firsts[p] {
			removed++
		}
	}
	t.Logf("payload %d B, %d partitions, fsync_interval %s, %s: %.0f msg/s appended, %.0f msg/s pub-acked over %.0fs (%d failed); "+
		"node %s (%d write_bytes), device %s (%d sectors; of it the ext4 journal %s) per payload byte (%.0f); %.0f rounds/s, %.0f fsyncs/s; retention removed segments of %d of %d partitions in the window",
		c.payload, c.partitions, or(c.interval, "10ms"), or(c.extra, "no other wal keys"), float64(b.appended-a.appended)/secs, res.rate, secs, failed.Load(),
		ratio(res.node), b.writeBytes-a.writeBytes, ratio(res.device), b.sectors-a.sectors, journal, payload,
		(b.rounds-a.rounds)/secs, (b.fsyncs-a.fsyncs)/secs, removed, c.partitions)
	if removed == 0 {
		t.Errorf("retention removed no segment during the window: the figure is not at steady state with retention")
	}
	if res.rate < float64(rate)/2 {
		t.Errorf("only %.0f msg/s acked of %d asked", res.rate, rate)
	}
	return res
}

// loopDisk is an ext4 file system on a loop device made for one measurement.
type loopDisk struct {
	mnt  string
	dev  string // loopN
	root string
}

// wampLoopDisk makes a fresh ext4 loop disk, or returns nil (and says why)
// when the machine does not allow it or EDGEQ_E2E_WAMP_LOOP is 0.
func wampLoopDisk(t *testing.T) *loopDisk {
	t.Helper()
	why := ""
	switch {
	case os.Getenv("EDGEQ_E2E_WAMP_LOOP") == "0":
		why = "EDGEQ_E2E_WAMP_LOOP=0"
	case os.Geteuid() != 0:
		why = "not root"
	}
	if _, err := os.Stat("/dev/loop-control"); why == "" && err != nil {
		why = "no /dev/loop-control"
	}
	if _, err := exec.LookPath("mkfs.ext4"); why == "" && err != nil {
		why = "no mkfs.ext4 (e2fsprogs)"
	}
	if why != "" {
		t.Logf("device figure not measured: %s", why)
		return nil
	}
	d := &loopDisk{root: t.TempDir()}
	img := filepath.Join(d.root, "disk.img")
	d.mnt = filepath.Join(d.root, "mnt")
	fail := func(what string, err error, out string) *loopDisk {
		t.Logf("device figure not measured: %s: %v %s", what, err, out)
		return nil
	}
	if err := os.Mkdir(d.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 1<<30); err != nil {
		t.Fatal(err)
	}
	// No lazy init: the kernel would zero inode tables during the window.
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img).CombinedOutput(); err != nil {
		return fail("mkfs.ext4", err, string(out))
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		return fail("losetup", err, string(out))
	}
	d.dev = filepath.Base(strings.TrimSpace(string(out)))
	t.Cleanup(func() {
		exec.Command("losetup", "-d", "/dev/"+d.dev).Run()
	})
	if out, err := exec.Command("mount", "-t", "ext4", "/dev/"+d.dev, d.mnt).CombinedOutput(); err != nil {
		return fail("mount", err, string(out))
	}
	// Registered after losetup's cleanup, so it runs before it; the node's
	// cleanup, registered later, runs before both.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", d.mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", d.mnt, err, out)
		}
	})
	t.Logf("data directory on ext4 on /dev/%s (1 GiB image)", d.dev)
	return d
}

// syncfs writes back everything dirty on the loop file system, so that a
// window's sector count holds what the window dirtied.
func (d *loopDisk) syncfs(t *testing.T) {
	f, err := os.Open(d.mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatalf("syncfs %s: %v", d.mnt, err)
	}
}

// sectorsWritten is the loop device's written sectors (512 bytes each,
// /sys/block/<dev>/stat field 7).
func (d *loopDisk) sectorsWritten(t *testing.T) int64 {
	b, err := os.ReadFile(filepath.Join("/sys/block", d.dev, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		t.Fatalf("/sys/block/%s/stat: %q", d.dev, b)
	}
	v, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// journal reads the file system's jbd2 statistics: commits so far and the
// average logged blocks (4 KiB) per commit; 0, 0 when not available.
func (d *loopDisk) journal() (tx, blocks int64) {
	b, err := os.ReadFile(filepath.Join("/proc/fs/jbd2", d.dev+"-8", "info"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[1] == "transactions":
			tx, _ = strconv.ParseInt(f[0], 10, 64)
		case strings.HasSuffix(line, "logged blocks per transaction") && len(f) > 0:
			blocks, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return tx, blocks
}

// metricSum adds up every series of a metric family (all label sets).
func metricSum(t testing.TB, n *node, family string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range metricLines(t, n) {
		rest, ok := strings.CutPrefix(line, family)
		if !ok || (rest == "" || (rest[0] != ' ' && rest[0] != '{')) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}
