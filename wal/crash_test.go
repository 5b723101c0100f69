package wal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test runs this test binary as a child process that appends under
// load and prints every position the log acknowledged; the parent kills it
// with SIGKILL at random moments and checks the log after each reopen.
const crashChildEnv = "EDGEQ_WAL_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

func crashOptions() Options {
	o := testOptions()
	o.Partitions, o.HotPartitions = 4, 1
	o.Durability = DurabilityInterval
	o.FsyncInterval = 2 * time.Millisecond
	o.CheckpointInterval = 50 * time.Millisecond // checkpoints race the kill too
	return o
}

// crashChild appends forever from 8 goroutines over 40 devices, moving one
// device between partitions now and then, and prints "ack device seq partition
// offset" for every durable append.
func crashChild(dir string) {
	l, err := Open(dir, crashOptions(), quietLogger())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	var mu sync.Mutex
	emit := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, args...)
		out.Flush() // acked means printed: the parent must see it before the kill
		mu.Unlock()
	}
	emit("ready\n")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for i := 0; ; i++ {
				dev := fmt.Sprintf("dev-%d", rng.IntN(40))
				if g == 0 && i%200 == 199 {
					target := l.HomePartition("dev-7")
					if l.DevicePartition("dev-7") == target {
						target = l.HotPartition("dev-7")
					}
					if _, err := l.Move(context.Background(), "dev-7", target); err != nil {
						fmt.Fprintln(os.Stderr, "move:", err)
					}
					continue
				}
				rec := &Record{Device: dev, Source: "crash", Payload: []byte(fmt.Sprintf("%s|%d|%d", dev, g, i))}
				pos, err := l.Append(context.Background(), rec)
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(4)
				}
				emit("ack %s %d %d %d %s\n", dev, pos.Seq, pos.Partition, pos.Offset, rec.Payload)
			}
		}(g)
	}
	wg.Wait()
}

type ackedRecord struct {
	device    string
	seq       uint64
	partition int
	offset    uint64
	payload   string
}

func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	rounds := 20
	if r, err := strconv.Atoi(os.Getenv("EDGEQ_CRASH_ROUNDS")); err == nil && r > 0 {
		rounds = r // fewer under qemu-user (firmware tests)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(42, uint64(time.Now().UnixNano())))
	var acked []ackedRecord
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		if w := os.Getenv("EDGEQ_TEST_EXEC_WRAPPER"); w != "" {
			// Under qemu-user without binfmt_misc the child needs the emulator too.
			cmd = exec.Command(w, os.Args[0], "-test.run=^$")
		}
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// Wait until the child has opened (and repaired) the log, then let it
		// run for a random while before the kill.
		select {
		case l := <-lines:
			if l != "ready" {
				t.Fatalf("round %d: child said %q", round, l)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: child did not start: %s", round, stderr.String())
		}
		// The first ack, then a random while: on a loaded machine the first
		// group commit can take longer than the shortest sleep.
		var first string
		select {
		case first = <-lines:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: no ack within 30s: %s", round, stderr.String())
		}
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-readDone
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child ended by itself (%v): %s", round, err, stderr.String())
		}
		close(lines)
		n := 0
		rest := []string{first}
		for l := range lines {
			rest = append(rest, l)
		}
		for _, l := range rest {
			f := strings.Fields(l)
			if len(f) != 6 || f[0] != "ack" {
				continue // a line cut by the kill
			}
			seq, _ := strconv.ParseUint(f[2], 10, 64)
			p, _ := strconv.Atoi(f[3])
			off, _ := strconv.ParseUint(f[4], 10, 64)
			acked = append(acked, ackedRecord{f[1], seq, p, off, f[5]})
			n++
		}
		if n == 0 {
			t.Fatalf("round %d: no acks before the kill: %s", round, stderr.String())
		}
		verifyAfterCrash(t, dir, round, acked)
	}
	t.Logf("%d rounds, %d acknowledged appends verified", rounds, len(acked))
}

// verifyAfterCrash reopens the log and checks that every acknowledged append is
// present and intact, and that each device's sequence numbers are strictly
// increasing in log order with no repeats.
func verifyAfterCrash(t *testing.T, dir string, round int, acked []ackedRecord) {
	t.Helper()
	l := openTest(t, dir, crashOptions())
	defer l.Close()
	type key struct {
		p   int
		off uint64
	}
	stored := map[key]Entry{}
	seen := map[string]map[uint64]bool{}
	for p := 0; p < l.NumPartitions(); p++ {
		lastSeq := map[string]uint64{}
		for _, e := range readAll(t, l, p) {
			stored[key{p, e.Offset}] = e
			d := e.Record.Device
			if e.Record.Kind == KindData {
				if e.Record.Seq <= lastSeq[d] {
					t.Fatalf("round %d: partition %d offset %d: %s seq %d after %d", round, p, e.Offset, d, e.Record.Seq, lastSeq[d])
				}
				lastSeq[d] = e.Record.Seq
				if seen[d] == nil {
					seen[d] = map[uint64]bool{}
				}
				if seen[d][e.Record.Seq] {
					t.Fatalf("round %d: %s seq %d stored twice", round, d, e.Record.Seq)
				}
				seen[d][e.Record.Seq] = true
			}
		}
	}
	for _, a := range acked {
		e, ok := stored[key{a.partition, a.offset}]
		if !ok {
			t.Fatalf("round %d: acknowledged %+v is missing", round, a)
		}
		if e.Record.Device != a.device || e.Record.Seq != a.seq || string(e.Record.Payload) != a.payload {
			t.Fatalf("round %d: acknowledged %+v reads back as %s seq %d %q", round, a, e.Record.Device, e.Record.Seq, e.Record.Payload)
		}
	}
}
