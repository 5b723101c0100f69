package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestOrderTracker: scripted deliveries of 3 devices (message i is device
// i % 3) and what the tracker makes of them.
func TestOrderTracker(t *testing.T) {
	type step struct {
		i     int64
		first bool
		ack   bool // ack at once; otherwise later, by an ack step
	}
	cases := []struct {
		name                        string
		steps                       []step
		acks                        []int64 // acked after all steps
		outOfOrder, overlaps, redel int64
		complete                    bool
	}{
		{name: "in order, acked before the next", complete: true,
			steps: []step{{0, true, true}, {1, true, true}, {2, true, true}, {3, true, true}, {4, true, true}, {5, true, true}}},
		{name: "device 0 out of order", outOfOrder: 1, overlaps: 1,
			steps: []step{{3, true, true}, {0, true, true}}},
		{name: "next of a device before the previous ack", overlaps: 1,
			steps: []step{{0, true, false}, {3, true, true}}, acks: []int64{0}},
		{name: "two of a device in handlers at once", overlaps: 1,
			steps: []step{{1, true, false}, {1, false, true}}, acks: []int64{1}, redel: 1},
		{name: "redelivery after a lost ack is no reordering", redel: 1,
			steps: []step{{0, true, true}, {0, false, true}, {3, true, true}}},
	}
	for _, c := range cases {
		tr := newOrderTracker(6, 3)
		for _, s := range c.steps {
			tr.begin(s.i, s.first)
			if s.ack {
				tr.end(s.i)
			}
		}
		for _, i := range c.acks {
			tr.end(i)
		}
		complete := false
		select {
		case <-tr.done:
			complete = true
		default:
		}
		if tr.outOfOrder != c.outOfOrder || tr.overlaps != c.overlaps || tr.redeliveries != c.redel || complete != c.complete {
			t.Errorf("%s: out of order %d overlaps %d redeliveries %d complete %v, want %d %d %d %v",
				c.name, tr.outOfOrder, tr.overlaps, tr.redeliveries, complete, c.outOfOrder, c.overlaps, c.redel, c.complete)
		}
	}
}

// TestListenerPID: the bench finds a server process by its loopback
// listener (here a child process), never itself nor anything off this
// host; procCPU reads a live process.
func TestListenerPID(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHelperListener$")
	child.Env = append(os.Environ(), "EDGEQ_TEST_LISTENER=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := child.StdinPipe() // the child exits when it closes
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = child.Wait() }()
	var port int
	if _, err := fmt.Fscanf(bufio.NewReader(out), "port %d\n", &port); err != nil {
		t.Fatalf("child listener: %v", err)
	}
	if pid := listenerPID(fmt.Sprintf("nats://127.0.0.1:%d", port)); pid != child.Process.Pid {
		t.Errorf("listenerPID = %d, want the child's %d", pid, child.Process.Pid)
	}
	if s, ok := procCPU(child.Process.Pid); !ok || s < 0 {
		t.Errorf("procCPU(child) = %v %v", s, ok)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	own := ln.Addr().(*net.TCPAddr).Port
	for _, u := range []string{fmt.Sprintf("nats://127.0.0.1:%d", own), "nats://192.0.2.1:4222", "nats://example.invalid:4222", "::bad"} {
		if pid := listenerPID(u); pid != 0 {
			t.Errorf("listenerPID(%q) = %d, want 0", u, pid)
		}
	}
	if _, ok := procCPU(0); ok {
		t.Error("procCPU(0) ok")
	}
}

// TestHelperListener is TestListenerPID's child: it listens on loopback,
// prints the port and waits for its stdin to close.
func TestHelperListener(t *testing.T) {
	if os.Getenv("EDGEQ_TEST_LISTENER") != "1" {
		t.Skip("the child of TestListenerPID")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
