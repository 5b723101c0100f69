package subject

import "testing"

func BenchmarkMatch(b *testing.B) {
	filter, subject := "telemetry.*.>", []byte("telemetry.dev-0042.temp")
	for b.Loop() {
		if !Match(filter, subject) {
			b.Fatal("no match")
		}
	}
}
