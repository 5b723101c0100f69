package natsproto

import (
	"fmt"
	"testing"
)

// pubStream is n PUBs of a typical telemetry message, as one client sends them.
func pubStream(n int) []byte {
	payload := []byte(`{"temp":21.5,"hum":40.1,"bat":3.71}`)
	var s []byte
	for i := range n {
		s = AppendPub(s, fmt.Sprintf("telemetry.dev-%04d", i%100), "", payload)
	}
	return s
}

// hpubStream is n HPUBs carrying a small header block.
func hpubStream(tb testing.TB, n int) []byte {
	hdr := mustHeader(tb, 0, "", "Nats-Msg-Id", "0123456789abcdef", "Content-Type", "application/json")
	payload := []byte(`{"temp":21.5,"hum":40.1,"bat":3.71}`)
	var s []byte
	for i := range n {
		s = AppendHPub(s, fmt.Sprintf("telemetry.dev-%04d", i%100), "_INBOX.abc.1", hdr, payload)
	}
	return s
}

// drain feeds stream in reads of readSize bytes and consumes every op.
func drain(tb testing.TB, p *Parser, stream []byte, readSize int) int {
	ops := 0
	for rest := stream; len(rest) > 0; {
		n := min(readSize, len(rest))
		if err := p.Feed(rest[:n]); err != nil {
			tb.Fatal(err)
		}
		rest = rest[n:]
		for {
			_, ok, err := p.Next()
			if err != nil {
				tb.Fatal(err)
			}
			if !ok {
				break
			}
			ops++
		}
	}
	return ops
}

func benchmarkParse(b *testing.B, stream []byte, frames, readSize int) {
	p, err := NewParser(DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if drain(b, p, stream, readSize) != frames {
			b.Fatal("lost ops")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/msg")
}

// Reads of 32 KiB keep most frames whole; 4 KiB reads cut one frame in about
// every 60 and exercise the scratch path.
func BenchmarkParsePub(b *testing.B)      { benchmarkParse(b, pubStream(1000), 1000, 32<<10) }
func BenchmarkParsePubSplit(b *testing.B) { benchmarkParse(b, pubStream(1000), 1000, 4<<10) }
func BenchmarkParseHPub(b *testing.B)     { benchmarkParse(b, hpubStream(b, 1000), 1000, 32<<10) }
func BenchmarkParseHPubSplit(b *testing.B) {
	benchmarkParse(b, hpubStream(b, 1000), 1000, 4<<10)
}

func BenchmarkAppendHMsg(b *testing.B) {
	hdr := mustHeader(b, 0, "", "Edgeq-Device", "dev-0042", "Edgeq-Seq", "123456")
	payload := []byte(`{"temp":21.5,"hum":40.1,"bat":3.71}`)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendHMsg(buf[:0], "telemetry.dev-0042", "7", "$EQ.ACK.n1.3.99", hdr, payload)
	}
}

// TestParsePubDoesNotAllocate: in steady state, parsing PUBs allocates
// nothing, whether frames arrive whole or cut across reads.
func TestParsePubDoesNotAllocate(t *testing.T) {
	stream := pubStream(500)
	for _, readSize := range []int{32 << 10, 4 << 10, 100, 7} {
		p, err := NewParser(DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		drain(t, p, stream, readSize) // warm-up: scratch reaches its working size
		allocs := testing.AllocsPerRun(20, func() {
			if drain(t, p, stream, readSize) != 500 {
				t.Fatal("lost ops")
			}
		})
		if allocs != 0 {
			t.Errorf("reads of %d bytes: %v allocs per stream, want 0", readSize, allocs)
		}
	}
}
