package mqttproto

import (
	"fmt"
	"testing"
)

// publishStream is a CONNECT and n QoS 1 PUBLISHes of a typical telemetry
// reading, as one client sends them.
func publishStream(b testing.TB, v Version, n int) []byte {
	s := connectFor(b, v)
	payload := []byte(`{"temp":21.5,"hum":40.1,"bat":3.71}`)
	for i := range n {
		p := Packet{Type: PUBLISH, Version: v, QoS: 1, PacketID: uint16(i%65535 + 1),
			Topic: fmt.Appendf(nil, "telemetry/dev-%04d", i%100), Payload: payload}
		if v == Version5 {
			p.Props = pr("user", [2]string{"unit", "C"})
		}
		var err error
		if s, err = Append(s, &p); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkDecodePublish decodes QoS 1 PUBLISHes from 4 KiB reads, as a
// connection's read loop would: one op is one PUBLISH (the CONNECT is
// amortised away).
func BenchmarkDecodePublish(b *testing.B) {
	for _, v := range []Version{Version311, Version5} {
		b.Run("v"+v.String(), func(b *testing.B) {
			const n = 1000
			s := publishStream(b, v, n)
			p, _ := NewParser(DefaultLimits(), ServerSide)
			b.SetBytes(int64(len(s) / n))
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			for done < b.N {
				p.Reset()
				for rest := s; len(rest) > 0 && done < b.N; {
					chunk := rest[:min(4096, len(rest))]
					rest = rest[len(chunk):]
					if err := p.Feed(chunk); err != nil {
						b.Fatal(err)
					}
					for {
						pkt, ok, err := p.Next()
						if err != nil {
							b.Fatal(err)
						}
						if !ok {
							break
						}
						if pkt.Type == PUBLISH {
							done++
						}
					}
				}
			}
		})
	}
}

// BenchmarkEncodePublish appends a QoS 1 PUBLISH (a delivery to a
// subscriber) into a reused buffer.
func BenchmarkEncodePublish(b *testing.B) {
	payload := []byte(`{"temp":21.5,"hum":40.1,"bat":3.71}`)
	for _, v := range []Version{Version311, Version5} {
		b.Run("v"+v.String(), func(b *testing.B) {
			p := Packet{Type: PUBLISH, Version: v, QoS: 1, PacketID: 1, Topic: []byte("telemetry/dev-0042"), Payload: payload}
			if v == Version5 {
				p.Props.User = []UserProperty{{[]byte("Edgeq-Seq"), []byte("12345")}}
			}
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p.PacketID = uint16(i%65535 + 1)
				var err error
				if buf, err = Append(buf[:0], &p); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

// BenchmarkAppendAck appends a PUBACK.
func BenchmarkAppendAck(b *testing.B) {
	buf := make([]byte, 0, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = AppendAck(buf[:0], Version5, PUBACK, uint16(i%65535+1), Success)
	}
}
