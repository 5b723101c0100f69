package jsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/wal"
)

// run starts the service's background work (last-value index, ordered
// wake-ups, expiry) until the test ends.
func (b *bed) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		b.svc.Run(ctx)
		close(done)
	}()
	b.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// put appends a reading of device with payload v.
func (b *bed) put(device, v string) wal.Position {
	b.t.Helper()
	pos, err := b.log.Append(context.Background(), &wal.Record{Kind: wal.KindData, Device: device, Time: time.Now().UnixNano(), Payload: []byte(v)})
	if err != nil {
		b.t.Fatal(err)
	}
	return pos
}

func waitTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a hang only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMessageGet(t *testing.T) {
	b := newBed(t, func(c *Config) { c.KVBucket = "telemetry" })
	b.put("d1", "a")
	p2 := b.put("d1", "b")
	p3 := b.put("d2", "c")
	b.run()
	seq2 := StreamSeq(p2.Partition, p2.Offset)
	tests := []struct {
		name, stream string
		req          MsgGetRequest
		wantPayload  string
		wantSubject  string
		wantCode     int
	}{
		{"by seq", "TELEMETRY", MsgGetRequest{Seq: seq2}, "b", "telemetry.d1", 0},
		{"last by subject", "TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.d1"}, "b", "telemetry.d1", 0},
		{"other device", "TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.d2"}, "c", "telemetry.d2", 0},
		{"kv view", "KV_telemetry", MsgGetRequest{LastBySubj: "$KV.telemetry.d1"}, "b", "$KV.telemetry.d1", 0},
		{"kv view by seq", "KV_telemetry", MsgGetRequest{Seq: StreamSeq(p3.Partition, p3.Offset)}, "c", "$KV.telemetry.d2", 0},
		{"unknown device", "TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.nope"}, "", "", CodeNoMessageFound},
		{"not a device subject", "TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.a.b"}, "", "", CodeNoMessageFound},
		{"kv subject on the stream", "TELEMETRY", MsgGetRequest{LastBySubj: "$KV.telemetry.d1"}, "", "", CodeNoMessageFound},
		{"seq past the end", "TELEMETRY", MsgGetRequest{Seq: StreamSeq(0, 1000)}, "", "", CodeNoMessageFound},
		{"seq of no partition", "TELEMETRY", MsgGetRequest{Seq: 1<<SeqPartitionBits | 2000}, "", "", CodeNoMessageFound},
		{"other stream", "OTHER", MsgGetRequest{Seq: seq2}, "", "", CodeStreamNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, e := b.svc.GetMsg(tc.stream, tc.req)
			if tc.wantCode != 0 {
				if e == nil || int(e.ErrorCode) != tc.wantCode {
					t.Fatalf("got %+v, %v; want error %d", f, e, tc.wantCode)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if string(f.Entry.Record.Payload) != tc.wantPayload || f.Subject != tc.wantSubject || f.Stream != tc.stream {
				t.Fatalf("got %q on %s in %s", f.Entry.Record.Payload, f.Subject, f.Stream)
			}
			if p, off, _ := b.svc.locate(f.Seq); p != f.Partition || off != f.Entry.Offset {
				t.Fatalf("seq %d is (%d, %d), found at (%d, %d)", f.Seq, p, off, f.Partition, f.Entry.Offset)
			}
		})
	}
	// A reading after the index caught up is the new last one.
	waitTrue(t, "the index", b.svc.last.Ready)
	b.put("d1", "z")
	waitTrue(t, "the new reading", func() bool {
		f, e := b.svc.GetMsg("TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.d1"})
		return e == nil && string(f.Entry.Record.Payload) == "z"
	})
}

func TestParseMsgGet(t *testing.T) {
	tests := []struct {
		body, subject string
		ok            bool
	}{
		{`{"seq":5}`, "", true},
		{`{"last_by_subj":"telemetry.d1"}`, "", true},
		{``, "telemetry.d1", true},
		{`{"seq":5}`, "telemetry.d1", false},
		{`{"seq":5,"last_by_subj":"telemetry.d1"}`, "", false},
		{`{}`, "", false},
		{`{"next_by_subj":"telemetry.d1","seq":1}`, "", false},
		{`{"multi_last":["telemetry.>"]}`, "", false},
		{`nope`, "", false},
	}
	for _, tc := range tests {
		_, e := ParseMsgGet([]byte(tc.body), tc.subject)
		if (e == nil) != tc.ok {
			t.Errorf("%q %q: %v, want ok %v", tc.body, tc.subject, e, tc.ok)
		}
	}
}

func TestLastIndexReadBackBeforeReady(t *testing.T) {
	b := newBed(t, nil)
	b.put("d1", "a")
	b.put("d1", "b")
	// Not running: the index never catches up, lookups read back.
	pos, ok := b.svc.last.Last("d1")
	if !ok || pos.Seq != 2 {
		t.Fatalf("read back: %+v %v", pos, ok)
	}
	if _, ok := b.svc.last.Last("never"); ok {
		t.Fatal("a device never stored was found")
	}
}

func TestLastIndexBound(t *testing.T) {
	b := newBed(t, func(c *Config) { c.MaxDevices = 2 })
	for i := range 4 {
		b.put(fmt.Sprintf("d%d", i), "x")
	}
	b.run()
	waitTrue(t, "the index", b.svc.last.Ready)
	if n, d := b.svc.last.Len(), b.svc.last.Dropped.Load(); n != 2 || d != 2 {
		t.Fatalf("indexed %d, dropped %d; want 2 and 2", n, d)
	}
	// A device left out is still found, by reading back.
	for i := range 4 {
		if _, ok := b.svc.last.Last(fmt.Sprintf("d%d", i)); !ok {
			t.Fatalf("d%d not found", i)
		}
	}
	if n := b.svc.last.Len(); n != 2 {
		t.Fatalf("the read-back grew the index to %d", n)
	}
}

func TestStreamInfoViews(t *testing.T) {
	b := newBed(t, func(c *Config) { c.KVBucket = "telemetry" })
	info := func(stream string) jetstream.StreamInfo {
		var si jetstream.StreamInfo
		if err := json.Unmarshal(b.svc.Handle("STREAM.INFO."+stream, nil), &si); err != nil {
			t.Fatal(err)
		}
		return si
	}
	if si := info("TELEMETRY"); !si.Config.AllowDirect || si.Config.MaxMsgsPerSubject != -1 {
		t.Fatalf("stream: %+v", si.Config)
	}
	// What nats.go's KeyValue checks: the stream KV_<bucket>, max msgs per
	// subject >= 1; subjects $KV.<bucket>.>.
	si := info("KV_telemetry")
	if si.Config.MaxMsgsPerSubject != 1 || !si.Config.AllowDirect || !slices.Equal(si.Config.Subjects, []string{"$KV.telemetry.>"}) {
		t.Fatalf("kv view: %+v", si.Config)
	}
	var names struct {
		Streams []string `json:"streams"`
	}
	for body, want := range map[string][]string{
		``:                              {"TELEMETRY", "KV_telemetry"},
		`{"subject":"telemetry.d1"}`:    {"TELEMETRY"},
		`{"subject":"$KV.telemetry.>"}`: {"KV_telemetry"},
		`{"subject":"other.x"}`:         {},
	} {
		if err := json.Unmarshal(b.svc.Handle("STREAM.NAMES", []byte(body)), &names); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names.Streams, want) {
			t.Errorf("names for %q: %v, want %v", body, names.Streams, want)
		}
	}
	for _, api := range []string{"STREAM.CREATE.KV_telemetry", "STREAM.PURGE.KV_telemetry", "STREAM.DELETE.KV_telemetry", "STREAM.MSG.DELETE.KV_telemetry"} {
		if out := b.call(api, "{}"); errCode(out) != CodeKVReadOnly {
			t.Errorf("%s: %v", api, out)
		}
	}
	// Queue-group consumers do not read the view.
	out := b.call("CONSUMER.CREATE.KV_telemetry.w", map[string]any{"stream_name": "KV_telemetry", "config": map[string]any{"name": "w", "ack_policy": "explicit"}})
	if errCode(out) != CodeConsumerCreate {
		t.Fatalf("explicit consumer on the view: %v", out)
	}
	// Without a bucket there is no view.
	nb := newBed(t, nil)
	if out := nb.call("STREAM.INFO.KV_telemetry", nil); errCode(out) != CodeStreamNotFound {
		t.Fatalf("no bucket: %v", out)
	}
}

// ordered creates an ordered consumer and returns it.
func (b *bed) ordered(stream string, owner uint64, cfg map[string]any) (*Ordered, map[string]any) {
	b.t.Helper()
	cfg["ack_policy"] = "none"
	out := b.svc.HandleFrom("CONSUMER.CREATE."+stream, mustJSON(b.t, map[string]any{"stream_name": stream, "config": cfg}), owner)
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	if m["error"] != nil {
		return nil, m
	}
	name, _ := m["name"].(string)
	return b.svc.Ordered(stream, name), m
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// drain reads o to the end and returns the payloads.
func drain(t *testing.T, o *Ordered, batch int) []string {
	t.Helper()
	var got []string
	for o.More() {
		ms, err := o.Next(batch, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			got = append(got, string(m.Entry.Record.Payload))
		}
		if len(ms) == 0 {
			break
		}
	}
	return got
}

func TestOrderedDeliverPolicies(t *testing.T) {
	b := newBed(t, func(c *Config) { c.KVBucket = "telemetry" })
	b.run()
	var seqs []uint64
	for i := range 3 {
		for _, d := range []string{"a", "b", "c"} {
			p := b.put(d, fmt.Sprintf("%s%d", d, i))
			seqs = append(seqs, StreamSeq(p.Partition, p.Offset))
		}
	}
	waitTrue(t, "the index", b.svc.last.Ready)
	groups := len(b.reg.Stats())
	start := time.Now().Add(-time.Hour).Format(time.RFC3339Nano)
	tests := []struct {
		name   string
		stream string
		cfg    map[string]any
		want   []string // sorted; nil: check the count only
		count  int
	}{
		{"all of one device", "TELEMETRY", map[string]any{"filter_subject": "telemetry.b", "deliver_policy": "all"}, []string{"b0", "b1", "b2"}, 3},
		{"all", "TELEMETRY", map[string]any{"deliver_policy": "all"}, nil, 9},
		{"new", "TELEMETRY", map[string]any{"deliver_policy": "new"}, nil, 0},
		{"last of one device", "TELEMETRY", map[string]any{"filter_subject": "telemetry.a", "deliver_policy": "last"}, []string{"a2"}, 1},
		{"last per subject", "TELEMETRY", map[string]any{"filter_subject": "telemetry.>", "deliver_policy": "last_per_subject"}, []string{"a2", "b2", "c2"}, 3},
		{"kv watch", "KV_telemetry", map[string]any{"filter_subject": "$KV.telemetry.>", "deliver_policy": "last_per_subject"}, []string{"a2", "b2", "c2"}, 3},
		{"kv watch one key", "KV_telemetry", map[string]any{"filter_subject": "$KV.telemetry.c", "deliver_policy": "last_per_subject"}, []string{"c2"}, 1},
		{"by start time", "TELEMETRY", map[string]any{"filter_subject": "telemetry.c", "deliver_policy": "by_start_time", "opt_start_time": start}, []string{"c0", "c1", "c2"}, 3},
		{"by start sequence (the first)", "TELEMETRY", map[string]any{"deliver_policy": "by_start_sequence", "opt_start_seq": 1}, nil, 9},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, out := b.ordered(tc.stream, uint64(100+i), tc.cfg)
			if o == nil {
				t.Fatalf("create: %v", out)
			}
			if out["num_pending"] != float64(tc.count) && tc.cfg["filter_subject"] != "telemetry.b" && tc.cfg["filter_subject"] != "telemetry.c" {
				t.Errorf("num_pending %v, want %d", out["num_pending"], tc.count)
			}
			got := drain(t, o, 2)
			if len(got) != tc.count {
				t.Fatalf("got %v, want %d", got, tc.count)
			}
			if tc.want != nil {
				s := slices.Clone(got)
				slices.Sort(s)
				if !slices.Equal(s, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	if n := len(b.reg.Stats()); n != groups {
		t.Fatalf("ordered consumers made queue groups: %d -> %d", groups, n)
	}
	// Messages over every device come in stream-sequence order, with
	// consumer sequences 1, 2, 3, ... and pending counting down to 0.
	o, out := b.ordered("TELEMETRY", 1, map[string]any{"deliver_policy": "all"})
	if o == nil {
		t.Fatal(out)
	}
	var got []uint64
	for o.More() {
		ms, _ := o.Next(4, 0)
		for _, m := range ms {
			got = append(got, m.Seq)
			if m.ConsumerSeq != uint64(len(got)) || m.Pending != uint64(9-len(got)) {
				t.Fatalf("message %d: cseq %d pending %d", len(got), m.ConsumerSeq, m.Pending)
			}
		}
	}
	want := slices.Clone(seqs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
	// What comes later is read next.
	b.put("a", "a3")
	waitTrue(t, "the new reading", o.More)
	if ms, _ := o.Next(10, 0); len(ms) != 1 || string(ms[0].Entry.Record.Payload) != "a3" || ms[0].ConsumerSeq != 10 {
		t.Fatalf("new reading: %+v", ms)
	}
}

func TestOrderedBadInputAndBounds(t *testing.T) {
	b := newBed(t, func(c *Config) { c.MaxOrdered, c.MaxOrderedPerConn = 3, 2 })
	b.run()
	bad := []map[string]any{
		{"durable_name": "d", "deliver_policy": "all"},
		{"filter_subject": "other.>"},
		{"filter_subject": "telemetry.a.b"},
		{"filter_subjects": []string{"telemetry.a", "telemetry.b"}},
		{"deliver_policy": "by_start_sequence"},
		{"deliver_policy": "by_start_time"},
		{"deliver_policy": "all", "opt_start_seq": 4},
		{"deliver_subject": "telemetry.x"},
		{"inactive_threshold": -1},
	}
	for _, cfg := range bad {
		if o, out := b.ordered("TELEMETRY", 1, cfg); o != nil || out["error"] == nil {
			t.Errorf("%v: accepted", cfg)
		}
	}
	if o, _ := b.ordered("TELEMETRY", 1, map[string]any{}); o == nil {
		t.Fatal("first")
	}
	if o, _ := b.ordered("TELEMETRY", 1, map[string]any{}); o == nil {
		t.Fatal("second")
	}
	if o, out := b.ordered("TELEMETRY", 1, map[string]any{}); o != nil || errCode(out) != CodeMaxConsumers {
		t.Fatalf("third of one connection: %v", out)
	}
	last, _ := b.ordered("TELEMETRY", 2, map[string]any{})
	if last == nil {
		t.Fatal("another connection's")
	}
	if o, out := b.ordered("TELEMETRY", 3, map[string]any{}); o != nil || errCode(out) != CodeMaxConsumers {
		t.Fatalf("over the node's bound: %v", out)
	}
	if st := b.svc.OrderedStats(); st.Active != 3 || st.Refused != 2 {
		t.Fatalf("stats %+v", st)
	}
	// A closed connection's go; so does a deleted one.
	b.svc.DropOrdered(1)
	if out := b.call("CONSUMER.DELETE.TELEMETRY."+last.Name, nil); out["success"] != true || !last.Gone() {
		t.Fatalf("delete: %v", out)
	}
	if st := b.svc.OrderedStats(); st.Active != 0 {
		t.Fatalf("stats after drop and delete %+v", st)
	}
	// Unused for its inactive_threshold, an ordered consumer expires.
	o, _ := b.ordered("TELEMETRY", 4, map[string]any{"inactive_threshold": int64(time.Second)})
	b.svc.expireOrdered(b.now.Add(999 * time.Millisecond))
	if o.Gone() {
		t.Fatal("expired before its inactive_threshold")
	}
	o.Touch(b.now.Add(500 * time.Millisecond))
	b.svc.expireOrdered(b.now.Add(1400 * time.Millisecond))
	if o.Gone() {
		t.Fatal("expired though touched")
	}
	b.svc.expireOrdered(b.now.Add(1500 * time.Millisecond))
	if !o.Gone() {
		t.Fatal("not expired")
	}
	if st := b.svc.OrderedStats(); st.Expired != 1 {
		t.Fatalf("stats after expiry %+v", st)
	}
}

// TestOrderedResumesExactly: a consumer created at by_start_sequence =
// (a sequence another one with the same filter delivered) + 1 goes on
// exactly after it, across partitions of unequal length, where the
// offset-major start alone would repeat some readings and skip others.
func TestOrderedResumesExactly(t *testing.T) {
	b := newBed(t, nil)
	b.run()
	// Partitions of unequal length: one busy device, several quiet ones.
	for i := range 40 {
		b.put("busy", fmt.Sprintf("busy-%d", i))
		if i%4 == 0 {
			for _, d := range []string{"q1", "q2", "q3", "q4", "q5"} {
				b.put(d, fmt.Sprintf("%s-%d", d, i))
			}
		}
	}
	ref, out := b.ordered("TELEMETRY", 1, map[string]any{"deliver_policy": "all"})
	if ref == nil {
		t.Fatal(out)
	}
	all := drain(t, ref, 7)
	if len(all) != 90 {
		t.Fatalf("read %d, want 90", len(all))
	}
	for _, cut := range []int{1, 6, 7, 20, 45, 89} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			o, out := b.ordered("TELEMETRY", uint64(10+cut), map[string]any{"deliver_policy": "all"})
			if o == nil {
				t.Fatal(out)
			}
			var got []string
			var last uint64
			for len(got) < cut {
				ms, _ := o.Next(min(7, cut-len(got)), 0)
				for _, m := range ms {
					got = append(got, string(m.Entry.Record.Payload))
					last = m.Seq
				}
			}
			if cut%2 == 0 { // ended first (deleted), or still there
				b.svc.removeOrdered(o)
			}
			n, out := b.ordered("TELEMETRY", uint64(10+cut), map[string]any{"deliver_policy": "by_start_sequence", "opt_start_seq": last + 1})
			if n == nil {
				t.Fatal(out)
			}
			got = append(got, drain(t, n, 7)...)
			if !slices.Equal(got, all) {
				t.Fatalf("resumed after %d:\n got %v\nwant %v", cut, got, all)
			}
			b.svc.removeOrdered(n)
			b.svc.removeOrdered(o)
		})
	}
}

// TestOrderedResumesExactlyLive: readings stored after a consumer read
// the backlog carry lower sequences in short partitions than what it
// delivered from the long one; a reset right after one of them repeats
// nothing and skips nothing.
func TestOrderedResumesExactlyLive(t *testing.T) {
	b := newBed(t, nil)
	b.run()
	for i := range 40 {
		b.put("busy", fmt.Sprintf("busy-%d", i))
	}
	b.put("q1", "q1-0")
	o, out := b.ordered("TELEMETRY", 1, map[string]any{"deliver_policy": "all"})
	if o == nil {
		t.Fatal(out)
	}
	if got := drain(t, o, 16); len(got) != 41 {
		t.Fatalf("backlog: %d", len(got))
	}
	var later []string
	for i := 1; i <= 6; i++ {
		for _, d := range []string{"q1", "q2", "q3", "q4", "q5"} {
			v := fmt.Sprintf("%s-%d", d, i)
			b.put(d, v)
			later = append(later, v)
		}
	}
	waitTrue(t, "the later readings", o.More)
	ms, _ := o.Next(3, 0)
	if len(ms) != 3 {
		t.Fatalf("read %d", len(ms))
	}
	got := drain(t, o, 100)
	var want []string
	for _, m := range ms {
		want = append(want, string(m.Entry.Record.Payload))
	}
	want = append(want, got...)
	slices.Sort(want)
	wantSorted := slices.Clone(later)
	slices.Sort(wantSorted)
	if !slices.Equal(want, wantSorted) {
		t.Fatalf("later readings: %v, want %v", want, later)
	}
	b.svc.removeOrdered(o)
	n, out := b.ordered("TELEMETRY", 1, map[string]any{"deliver_policy": "by_start_sequence", "opt_start_seq": ms[2].Seq + 1})
	if n == nil {
		t.Fatal(out)
	}
	if again := drain(t, n, 100); !slices.Equal(again, got) {
		t.Fatalf("after the reset:\n got %v\nwant %v", again, got)
	}
}

func TestOrderedReadBytesReturnToZero(t *testing.T) {
	b := newBed(t, nil)
	for i := range 300 {
		b.put(fmt.Sprintf("d%d", i%7), "reading")
	}
	o, out := b.ordered("TELEMETRY", 1, map[string]any{"deliver_policy": "all"})
	if o == nil {
		t.Fatal(out)
	}
	if got := drain(t, o, 50); len(got) != 300 {
		t.Fatalf("read %d", len(got))
	}
	if n := b.svc.OrderedStats().ReadBytes; n != 0 {
		t.Fatalf("read bytes %d after the reads", n)
	}
}

// TestOrderedOneDeviceAcrossAMove: a device's reads scan its home and hot
// partitions only, and find its readings in both.
func TestOrderedOneDeviceAcrossAMove(t *testing.T) {
	b := newBed(t, nil)
	b.run()
	b.put("mover", "m1")
	b.put("other", "o1")
	if _, err := b.log.Move(context.Background(), "mover", b.log.HotPartition("mover")); err != nil {
		t.Fatal(err)
	}
	hot := b.put("mover", "m2")
	if hot.Partition != b.log.HotPartition("mover") {
		t.Fatalf("after the move the reading went to %d", hot.Partition)
	}
	o, out := b.ordered("TELEMETRY", 1, map[string]any{"filter_subject": "telemetry.mover", "deliver_policy": "all"})
	if o == nil {
		t.Fatal(out)
	}
	if got := drain(t, o, 10); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("got %v", got)
	}
	// The last value, before and after the index caught up.
	f, e := b.svc.GetMsg("TELEMETRY", MsgGetRequest{LastBySubj: "telemetry.mover"})
	if e != nil || string(f.Entry.Record.Payload) != "m2" {
		t.Fatalf("last: %v %v", f, e)
	}
}
