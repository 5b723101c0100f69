package modbus

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"edgeq/bridge/serial"
)

// BenchmarkRTUPaced polls a real pymodbus slave through a pty relay that
// paces every byte at the line's baud rate (1 start, 8 data, 1 stop bit), as
// a USB-RS485 adapter would: one device, 10 holding registers (one request
// per poll), the bus never idle. It reports polls per second, the CPU the
// polling thread spent per poll (the poll runs on the benchmark's goroutine,
// locked to its thread: the relay's goroutines are not counted), and the
// whole process's CPU per poll, relay included.
// Run: go test -run '^$' -bench RTUPaced -benchtime 100x ./bridge/modbus
func BenchmarkRTUPaced(b *testing.B) {
	for _, baud := range []int{9600, 115200} {
		b.Run(fmt.Sprintf("baud=%d", baud), func(b *testing.B) {
			charTime := 10 * time.Second / time.Duration(baud)
			w := newWire(b, charTime)
			startSlave(b, "rtu", w.slavePath, fmt.Sprint(baud), "1")
			c := DefaultConfig()
			c.Name = "bench"
			c.RTU = &RTU{Path: w.link, Baud: baud, Parity: serial.ParityNone}
			c.Devices = []Device{{Unit: 1, Device: "m1", Interval: 10 * time.Millisecond, Registers: testMap()[:9]}}
			bus, err := New(c, &collector{}, testLogger(b))
			if err != nil {
				b.Fatal(err)
			}
			defer bus.tr.release()
			if !bus.openTransport() {
				b.Fatal(bus.lastError())
			}
			d := bus.devs[0]
			ctx := context.Background()
			bus.poll(ctx, d, time.Now()) // warm up
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var before, after syscall.Rusage
			var t0, t1 unix.Timespec
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				d.sched.next[0] = time.Time{}
				bus.poll(ctx, d, time.Now())
			}
			b.StopTimer()
			el := time.Since(start)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1)
			thread := time.Duration(t1.Nano() - t0.Nano())
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			if ds := d.status(); ds.FailedPolls > 0 {
				b.Fatalf("failed polls: %+v", ds)
			}
			b.ReportMetric(float64(b.N)/el.Seconds(), "polls/s")
			b.ReportMetric(float64(thread.Microseconds())/float64(b.N), "poller-cpu-µs/poll")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "process-cpu-µs/poll")
		})
	}
}

// BenchmarkPollRecord is the poller's own work per poll, without I/O: plan
// the reads of a 16-register map, decode a response, write the record.
func BenchmarkPollRecord(b *testing.B) {
	regs := testMap()
	cfg := Config{Devices: []Device{{Unit: 1, Device: "m", Registers: regs}}}.WithDefaults()
	d := newDevice(cfg.Devices[0], 0, testEpoch)
	data := make([]byte, 2*23)
	bits := []byte{0x8d, 0x03}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for range b.N {
		d.sched.next[0] = time.Time{}
		p := d.begin(testEpoch)
		for _, rd := range p.reads {
			if rd.fn.bits() {
				p.decode(d, rd, bits)
			} else {
				p.decode(d, rd, data)
			}
		}
		buf = d.appendRecord(buf[:0], p)
		d.sched.done(p.groups, testEpoch, true, time.Minute)
	}
}
