package serial

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchFrame is a ~100-byte JSON telemetry frame (newline included).
func benchFrame(i int) string {
	f := fmt.Sprintf(`{"id":"meter-%02d","seq":%8d,"t":21.53,"h":40.2,"p":1013.25,"v":3.31,"status":"ok","fw":"1.4.2"}`, i%16, i)
	return f + "\n"
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPortThroughput pushes b.N frames through a pty into a real log
// (durability interval) as fast as the bridge takes them. A pty has no baud
// limit, so the baud rate only sets the port's configuration; line-frames/s
// is what that baud rate could carry at 10 bits per byte (8N1).
//
// cpu-µs/frame is the whole process (sensor writer, bridge, log) from
// getrusage, divided by frames.
func BenchmarkPortThroughput(b *testing.B) {
	for _, baud := range []int{115200, 921600} {
		b.Run(fmt.Sprintf("baud=%d", baud), func(b *testing.B) {
			s := newSensor(b)
			link := filepath.Join(b.TempDir(), "by-id")
			pointLink(b, link, s.path)
			log := openLog(b)
			cfg := portConfig("bench", link)
			cfg.Baud = baud
			p := startPort(b, cfg, log)
			waitOpen(b, p, s.path)

			const batch = 64
			chunks := make([]string, 16)
			for c := range chunks {
				var sb strings.Builder
				for i := range batch {
					sb.WriteString(benchFrame(c*batch + i))
				}
				chunks[c] = sb.String()
			}
			frameLen := len(benchFrame(0))

			b.ResetTimer()
			cpu0, t0 := cpuTime(), time.Now()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for sent := 0; sent < b.N; sent += batch {
					c := chunks[(sent/batch)%len(chunks)]
					if n := min(batch, b.N-sent); n < batch {
						c = c[:n*frameLen]
					}
					if _, err := s.master.Write([]byte(c)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			<-done
			waitFor(b, "all frames stored", func() bool { return p.Status().Stored >= uint64(b.N) })
			elapsed, cpu := time.Since(t0), cpuTime()-cpu0
			b.StopTimer()

			st := p.Status()
			if st.Stored != uint64(b.N) || st.FramesIn != uint64(b.N) {
				b.Fatalf("stored %d of %d: %+v", st.Stored, b.N, st)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "frames/s")
			b.ReportMetric(float64(baud)/10/float64(frameLen), "line-frames/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/frame")
			b.ReportMetric(float64(b.N*frameLen)/elapsed.Seconds()*10, "equiv-baud")
		})
	}
}

// BenchmarkPortPaced writes b.N frames at the rate the baud rate could
// carry (8N1) and reports the CPU per frame at that real-world rate, where
// group commit batches little; cpu-%-of-core is the share of one core the
// whole process used meanwhile. pacing-cpu-µs/frame is the same schedule of
// sleeps with no port and no log: the harness's own share, where wakeups are
// expensive (VMs).
func BenchmarkPortPaced(b *testing.B) {
	for _, baud := range []int{115200, 921600} {
		b.Run(fmt.Sprintf("baud=%d", baud), func(b *testing.B) {
			s := newSensor(b)
			link := filepath.Join(b.TempDir(), "by-id")
			pointLink(b, link, s.path)
			cfg := portConfig("paced", link)
			cfg.Baud = baud
			p := startPort(b, cfg, openLog(b))
			waitOpen(b, p, s.path)
			frameLen := len(benchFrame(0))
			interval := time.Duration(float64(time.Second) * float64(frameLen*10) / float64(baud))
			pacing := pacingCPU(min(b.N, 200), interval)

			b.ResetTimer()
			cpu0, t0 := cpuTime(), time.Now()
			for i := range b.N {
				if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
				s.write(b, benchFrame(i))
			}
			waitFor(b, "all frames stored", func() bool { return p.Status().Stored >= uint64(b.N) })
			elapsed, cpu := time.Since(t0), cpuTime()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "frames/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/frame")
			b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "cpu-%-of-core")
			b.ReportMetric(float64(pacing.Microseconds())/float64(min(b.N, 200)), "pacing-cpu-µs/frame")
		})
	}
}

// pacingCPU is the CPU time of n sleeps on the paced schedule.
func pacingCPU(n int, interval time.Duration) time.Duration {
	cpu0, t0 := cpuTime(), time.Now()
	for i := range n {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
	}
	return cpuTime() - cpu0
}

// BenchmarkFrameDecode is the pure per-frame cost: framing and decoding,
// without I/O or storage.
func BenchmarkFrameDecode(b *testing.B) {
	for _, f := range []struct {
		format Format
		frame  string
	}{
		{FormatJSON, benchFrame(7)},
		{FormatLine, "meter-07,seq=00000007,t=21.53,h=40.2,p=1013.25,v=3.31,status=ok,fw=1.4.2\n"},
	} {
		b.Run(string(f.format), func(b *testing.B) {
			cfg := validConfig()
			cfg.Format = f.format
			d, err := newDecoder(cfg)
			if err != nil {
				b.Fatal(err)
			}
			fr := NewFramer(cfg.MaxFrame)
			data := []byte(strings.Repeat(f.frame, 64))
			buf := make([]byte, 0, 256)
			b.SetBytes(int64(len(f.frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 64 {
				fr.Feed(data, func(frame []byte, _ DropReason) {
					if _, _, drop, err := d.decode(frame, buf); drop != dropNone {
						b.Fatal(err)
					}
				})
			}
		})
	}
}
