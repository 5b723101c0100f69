package jsapi

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestStreamSeqRoundTrip(t *testing.T) {
	for _, c := range []struct {
		p   int
		off uint64
	}{{0, 1}, {7, 1}, {1087, 1}, {3, 1 << 40}, {1023, 812}} {
		seq := StreamSeq(c.p, c.off)
		if p, off := SplitSeq(seq); p != c.p || off != c.off {
			t.Fatalf("(%d,%d) -> %d -> (%d,%d)", c.p, c.off, seq, p, off)
		}
	}
	// Within a partition the sequence grows with the offset.
	if StreamSeq(5, 10) >= StreamSeq(5, 11) || StreamSeq(1087, 10) >= StreamSeq(0, 11) {
		t.Fatal("sequence not offset-major")
	}
}

func TestAckSubjectRoundTrip(t *testing.T) {
	m := AckMeta{Stream: "TELEMETRY", Consumer: "workers", Delivered: 2, StreamSeq: 4097, ConsumerSeq: 9, Time: 1700000000000000000, Pending: 3}
	s := AppendAckSubject(nil, &m)
	if string(s) != "$JS.ACK.TELEMETRY.workers.2.4097.9.1700000000000000000.3" {
		t.Fatalf("subject %s", s)
	}
	got, st, cons, err := ParseAckSubject(s)
	if err != nil || string(st) != "TELEMETRY" || string(cons) != "workers" {
		t.Fatal(err, string(st), string(cons))
	}
	got.Stream, got.Consumer = m.Stream, m.Consumer
	if got != m {
		t.Fatalf("%+v != %+v", got, m)
	}
	for _, bad := range []string{"$JS.ACK.a.b.1.2.3.4", "$JS.ACK.a.b.0.2.3.4.5", "$JS.ACK.a.b.1.2.0.4.5", "$JS.ACK..b.1.2.3.4.5",
		"$JS.ACK.a.b.1.2.3.4.5.6", "$JS.ACK.a.b.x.2.3.4.5", "$EQ.ACK.a.b.1.2.3.4.5"} {
		if _, _, _, err := ParseAckSubject([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestParseNext(t *testing.T) {
	for _, c := range []struct {
		in    string
		batch int
		ok    bool
	}{{"", 1, true}, {"5", 5, true}, {`{"batch":10,"expires":1000000000,"no_wait":true}`, 10, true},
		{`{"batch":5000}`, 0, false}, {`{"batch":`, 0, false}, {`{"expires":-1}`, 0, false}, {"x", 0, false}} {
		r, err := ParseNext([]byte(c.in), MaxRequestBatch)
		if (err == nil) != c.ok || c.ok && r.Batch != c.batch {
			t.Errorf("%q: %+v %v", c.in, r, err)
		}
	}
}

func TestDedupWindowAndBound(t *testing.T) {
	now := time.Unix(1000, 0)
	d := NewDedup(time.Minute, 2, func() time.Time { return now })
	var got []any
	if !d.Begin("a", nil) {
		t.Fatal("first a not new")
	}
	if d.Begin("a", func(v any) { got = append(got, v) }) {
		t.Fatal("second a while in flight is new")
	}
	d.Done("a", 7)
	if len(got) != 1 || got[0] != 7 {
		t.Fatalf("waiter got %v", got)
	}
	if d.Begin("a", func(v any) { got = append(got, v) }) || len(got) != 2 {
		t.Fatal("done a not a duplicate")
	}
	// A failed first publish is forgotten: a retry is stored.
	d.Begin("b", nil)
	d.Done("b", nil)
	if !d.Begin("b", nil) {
		t.Fatal("retry after failure not new")
	}
	d.Done("b", 1)
	// Over the bound the oldest goes.
	d.Begin("c", nil)
	d.Done("c", 2)
	if d.Len() != 2 || d.Evicted.Load() != 1 || !d.Begin("a", nil) {
		t.Fatalf("len %d evicted %d", d.Len(), d.Evicted.Load())
	}
	// After the window everything done is forgotten.
	d.Done("a", 3)
	now = now.Add(2 * time.Minute)
	if !d.Begin("c", nil) || d.Len() != 1 {
		t.Fatalf("window: len %d", d.Len())
	}
	if d.Duplicates.Load() != 2 {
		t.Fatalf("duplicates %d", d.Duplicates.Load())
	}
}

func FuzzParseAckSubject(f *testing.F) {
	f.Add([]byte("$JS.ACK.TELEMETRY.workers.2.4097.9.1700000000000000000.3"))
	f.Add([]byte("$JS.ACK.a.b.1.2.3.4"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, st, cons, err := ParseAckSubject(b)
		if err != nil {
			return
		}
		m.Stream, m.Consumer = string(st), string(cons)
		if out := AppendAckSubject(nil, &m); !bytes.Equal(out, b) && !strings.Contains(string(b), ".0") {
			// Leading zeros parse to the same numbers; anything else must round-trip.
			if _, _, _, err := ParseAckSubject(out); err != nil {
				t.Fatalf("%q -> %q does not parse: %v", b, out, err)
			}
		}
	})
}

func FuzzParseNext(f *testing.F) {
	f.Add([]byte(`{"batch":10,"expires":1000000000,"idle_heartbeat":500000000}`))
	f.Add([]byte("12"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseNext(b, MaxRequestBatch)
		if err == nil && (r.Batch < 1 || r.Batch > MaxRequestBatch || r.Expires < 0) {
			t.Fatalf("%q accepted as %+v", b, r)
		}
	})
}

func TestQueueAckSubjectRoundTrip(t *testing.T) {
	q := QueueAck{Meta: AckMeta{Stream: "TELEMETRY", Consumer: "uploader", Delivered: 1, StreamSeq: 2051, ConsumerSeq: 1, Time: 5},
		Group: 77, Member: []byte("n1/00ab/c3-1"), Partition: 3}
	s := AppendQueueAckSubject(nil, &q)
	if !IsQueueAck(s) || strings.Count(string(s), ".") != 13 {
		t.Fatalf("subject %s", s)
	}
	got, err := ParseQueueAckSubject(s)
	if err != nil || got.Group != 77 || string(got.Member) != "n1/00ab/c3-1" || got.Partition != 3 || got.Meta.ConsumerSeq != 1 || got.Meta.Delivered != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{string(s[:len(s)-2]), string(s) + ".1", strings.Replace(string(s), ".77.", ".x.", 1)} {
		if _, err := ParseQueueAckSubject([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func FuzzParseQueueAckSubject(f *testing.F) {
	f.Add([]byte("$JS.ACK._.edgeq.TELEMETRY.uploader.1.2051.1.5.0.77.n1/00ab/c3-1.3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := ParseQueueAckSubject(b)
		if err == nil && (q.Meta.Delivered < 1 || q.Meta.ConsumerSeq == 0 || len(q.Member) == 0) {
			t.Fatalf("%q accepted as %+v", b, q)
		}
	})
}
