package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// bed is a Service on a real log and registry, with a state file in dir.
type bed struct {
	t    *testing.T
	dir  string
	log  *wal.Log
	reg  *groups.Registry
	svc  *Service
	now  time.Time
	cfg  Config
	gone []string // names the Deleted hook saw
}

func newBed(t *testing.T, mutate func(*Config)) *bed {
	t.Helper()
	b := &bed{t: t, dir: t.TempDir(), now: time.Unix(1_800_000_000, 0)}
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 4, 1
	o.FsyncInterval = time.Millisecond
	l, err := wal.Open(filepath.Join(b.dir, "wal"), o, quiet())
	if err != nil {
		t.Fatal(err)
	}
	b.log = l
	b.cfg = Config{Stream: "TELEMETRY", Prefix: "telemetry", MaxConsumers: 4, Defaults: groups.DefaultCoreConfig(),
		StateFile: filepath.Join(b.dir, "jetstream-consumers.json"), Logger: quiet()}
	if mutate != nil {
		mutate(&b.cfg)
	}
	b.open()
	t.Cleanup(func() {
		b.reg.Drain(time.Now().Add(time.Second))
		l.Close()
	})
	return b
}

// open makes a new registry and Service over the same log and file (a
// restart), restoring the consumers.
func (b *bed) open() {
	b.t.Helper()
	if b.reg != nil {
		b.reg.Drain(time.Now().Add(time.Second))
	}
	b.reg = groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: groups.DefaultCoreConfig(), GroupTTL: time.Hour, MaxGroups: 8}, b.log, quiet())
	b.svc = NewService(b.cfg, b.log, b.reg)
	b.svc.now = func() time.Time { return b.now }
	b.svc.SetHooks(Hooks{Deleted: func(c *Consumer) { b.gone = append(b.gone, c.Name) }, Owned: func(groups.Member) bool { return false }})
	if err := b.svc.Restore(); err != nil {
		b.t.Fatal(err)
	}
}

// call answers api with body and decodes the answer.
func (b *bed) call(api string, body any) map[string]any {
	b.t.Helper()
	var raw []byte
	switch v := body.(type) {
	case string:
		raw = []byte(v)
	default:
		raw, _ = json.Marshal(v)
	}
	var out map[string]any
	if err := json.Unmarshal(b.svc.Handle(api, raw), &out); err != nil {
		b.t.Fatalf("%s: answer is not JSON: %v", api, err)
	}
	return out
}

// errCode is the err_code of an answer, 0 without an error.
func errCode(out map[string]any) int {
	e, _ := out["error"].(map[string]any)
	c, _ := e["err_code"].(float64)
	return int(c)
}

func (b *bed) create(name string, cfg map[string]any) map[string]any {
	b.t.Helper()
	api := "CONSUMER.CREATE.TELEMETRY"
	if name != "" {
		api += "." + name
	}
	return b.call(api, map[string]any{"stream_name": "TELEMETRY", "config": cfg})
}

func (b *bed) names() []string { return b.svc.consumerNames(b.svc.cfg.Stream) }

func (b *bed) hasGroup(queueName string) bool {
	for _, gs := range b.reg.Stats() {
		if gs.Key.Queue == queueName {
			return true
		}
	}
	return false
}

func (b *bed) append(device string, at time.Time) wal.Position {
	b.t.Helper()
	pos, err := b.log.Append(context.Background(), &wal.Record{Kind: wal.KindData, Device: device, Time: at.UnixNano(), Payload: []byte("x")})
	if err != nil {
		b.t.Fatal(err)
	}
	return pos
}

func TestConsumersSurviveRestart(t *testing.T) {
	b := newBed(t, nil)
	for _, name := range []string{"alpha", "beta"} {
		if out := b.create(name, map[string]any{"durable_name": name, "ack_policy": "explicit", "deliver_policy": "all", "ack_wait": int64(7 * time.Second)}); errCode(out) != 0 {
			t.Fatalf("create %s: %v", name, out)
		}
	}
	if out := b.call("CONSUMER.DELETE.TELEMETRY.beta", ""); out["success"] != true {
		t.Fatalf("delete: %v", out)
	}
	b.open()
	if got := b.names(); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("after restart: %v", got)
	}
	c, e := b.svc.Lookup("TELEMETRY", "alpha")
	if e != nil || c.Config.AckWait != 7*time.Second || !b.hasGroup("alpha") || b.hasGroup("beta") {
		t.Fatalf("restored %+v %v, groups %v", c, e, b.reg.Stats())
	}
	// With no state file, nothing is kept (the check that the test above
	// depends on persistence).
	b.cfg.StateFile = ""
	b.open()
	if got := b.names(); len(got) != 0 {
		t.Fatalf("without a state file: %v", got)
	}
}

func TestConsumerFileCorruptOrOverLimit(t *testing.T) {
	for _, c := range []struct {
		name, content string
		corrupt       bool
	}{
		{"garbage", "{not json", true},
		{"truncated", `{"version":1,"consumers":[{"name":"a"`, true},
		{"version", `{"version":9,"consumers":[]}`, true},
		{"bad name", `{"version":1,"consumers":[{"name":"a.b","config":{"name":"a.b"}}]}`, true},
		{"repeated", `{"version":1,"consumers":[{"name":"a","config":{"name":"a"}},{"name":"a","config":{"name":"a"}}]}`, true},
		{"trailing", `{"version":1,"consumers":[]} {}`, true},
		{"refused config", `{"version":1,"consumers":[{"name":"a","config":{"name":"a","deliver_policy":"last"}}]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBed(t, nil)
			if err := os.WriteFile(b.cfg.StateFile, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			b.open()
			if got := b.names(); len(got) != 0 {
				t.Fatalf("consumers %v", got)
			}
			_, err := os.Stat(b.cfg.StateFile + ".corrupt")
			if c.corrupt != (err == nil) {
				t.Fatalf(".corrupt exists: %v, want %v", err == nil, c.corrupt)
			}
			// The node goes on: a consumer can be created and is kept.
			if out := b.create("fresh", map[string]any{"durable_name": "fresh"}); errCode(out) != 0 {
				t.Fatal(out)
			}
			b.open()
			if got := b.names(); len(got) != 1 {
				t.Fatalf("after a second restart: %v", got)
			}
		})
	}
	// More consumers in the file than max_consumers allows: the oldest are
	// restored, the rest dropped (and the file rewritten).
	b := newBed(t, nil)
	for i := range 4 {
		b.now = b.now.Add(time.Second)
		if out := b.create(fmt.Sprintf("c%d", i), map[string]any{"durable_name": fmt.Sprintf("c%d", i)}); errCode(out) != 0 {
			t.Fatal(out)
		}
	}
	b.cfg.MaxConsumers = 2
	b.open()
	if got := b.names(); len(got) != 2 || got[0] != "c0" || got[1] != "c1" {
		t.Fatalf("over the limit: %v", got)
	}
	if out := b.create("c9", map[string]any{"durable_name": "c9"}); errCode(out) != CodeMaxConsumers {
		t.Fatalf("create over the limit: %v", out)
	}
}

func TestDeleteRemovesGroupUnlessShared(t *testing.T) {
	b := newBed(t, nil)
	for i := range 20 {
		b.append(fmt.Sprintf("d%d", i), b.now)
	}
	b.create("work", map[string]any{"durable_name": "work", "deliver_policy": "all"})
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "work"}
	if !b.hasGroup("work") || !b.log.Offsets().Has("queue:telemetry.>|work") {
		t.Fatalf("no group or offsets: %v", b.reg.Stats())
	}
	// A core member (not the front end's own) shares the group: refused.
	if _, err := b.reg.Join(key, "core-1", memberFunc(func(*groups.Delivery) bool { return true }), 0); err != nil {
		t.Fatal(err)
	}
	out := b.call("CONSUMER.DELETE.TELEMETRY.work", "")
	if errCode(out) != CodeConsumerInUse || !strings.Contains(fmt.Sprint(out), "share") {
		t.Fatalf("shared delete: %v", out)
	}
	if len(b.names()) != 1 || !b.hasGroup("work") || len(b.gone) != 0 {
		t.Fatal("a refused delete changed something")
	}
	b.reg.Leave(key, "core-1")
	if out := b.call("CONSUMER.DELETE.TELEMETRY.work", ""); out["success"] != true {
		t.Fatalf("delete: %v", out)
	}
	if b.hasGroup("work") || b.log.Offsets().Has("queue:telemetry.>|work") || len(b.gone) != 1 || b.svc.Deleted.Load() != 1 {
		t.Fatalf("after delete: groups %v, hook %v", b.reg.Stats(), b.gone)
	}
	if out := b.call("CONSUMER.DELETE.TELEMETRY.work", ""); errCode(out) != CodeConsumerNotFound {
		t.Fatalf("second delete: %v", out)
	}
	if out := b.call("CONSUMER.DELETE.OTHER.work", ""); errCode(out) != CodeStreamNotFound {
		t.Fatalf("other stream: %v", out)
	}
}

type memberFunc func(*groups.Delivery) bool

func (f memberFunc) Deliver(d *groups.Delivery) bool { return f(d) }

func TestDeleteInClusterForgetsNameOnly(t *testing.T) {
	b := newBed(t, func(c *Config) { c.Clustered = true })
	b.create("work", map[string]any{"durable_name": "work"})
	if out := b.call("CONSUMER.DELETE.TELEMETRY.work", ""); out["success"] != true {
		t.Fatalf("delete: %v", out)
	}
	if len(b.names()) != 0 || !b.hasGroup("work") {
		t.Fatalf("cluster delete: names %v, groups %v", b.names(), b.reg.Stats())
	}
	for _, cfg := range []map[string]any{{}, {"durable_name": "idle", "inactive_threshold": int64(time.Minute)}} {
		if out := b.create("", cfg); errCode(out) != CodeConsumerCreate || !strings.Contains(fmt.Sprint(out), "cluster") {
			t.Fatalf("expiring consumer in a cluster: %v", out)
		}
	}
}

// TestDeleteInClusterDeletesGroup: with DeleteGroup (the node's), a
// consumer delete in a cluster hands its group over after the name went; a
// refusal there still deletes the consumer.
func TestDeleteInClusterDeletesGroup(t *testing.T) {
	var asked []groups.GroupKey
	refuse := false
	b := newBed(t, func(c *Config) {
		c.Clustered = true
		c.DeleteGroup = func(k groups.GroupKey) error {
			asked = append(asked, k)
			if refuse {
				return fmt.Errorf("a peer is unreachable")
			}
			return nil
		}
	})
	for _, name := range []string{"work", "kept"} {
		b.create(name, map[string]any{"durable_name": name})
		refuse = name == "kept"
		if out := b.call("CONSUMER.DELETE.TELEMETRY."+name, ""); out["success"] != true {
			t.Fatalf("delete %s: %v", name, out)
		}
	}
	if len(b.names()) != 0 || len(asked) != 2 || asked[0] != (groups.GroupKey{Filter: "telemetry.>", Queue: "work"}) || asked[1].Queue != "kept" {
		t.Fatalf("names %v, groups handed over %v", b.names(), asked)
	}
}

func TestEphemeralExpires(t *testing.T) {
	b := newBed(t, nil)
	out := b.create("", map[string]any{"deliver_policy": "all"}) // legacy form: the server names it
	cfg, _ := out["config"].(map[string]any)
	name, _ := out["name"].(string)
	if errCode(out) != 0 || len(name) != 8 || cfg["durable_name"] != nil || cfg["inactive_threshold"] != float64(DefaultInactiveThreshold) {
		t.Fatalf("ephemeral: %v", out)
	}
	// nats.go's jetstream package names ephemerals itself.
	if out := b.create("eph2", map[string]any{"name": "eph2", "inactive_threshold": int64(time.Minute)}); errCode(out) != 0 {
		t.Fatal(out)
	}
	if out := b.create("dur", map[string]any{"durable_name": "dur"}); errCode(out) != 0 {
		t.Fatal(out)
	}
	c, _ := b.svc.Lookup("TELEMETRY", name)
	start := b.now
	b.svc.Touch(c, start.Add(3*time.Second))
	if gone := b.svc.Expire(start.Add(7 * time.Second)); len(gone) != 0 {
		t.Fatalf("touched 4 s ago, expired: %v", gone)
	}
	// Ephemerals are kept across a restart too (so their offsets do not
	// outlive them); their inactivity counts from the restart.
	b.open()
	if len(b.names()) != 3 {
		t.Fatalf("after restart: %v", b.names())
	}
	if gone := b.svc.Expire(start.Add(8 * time.Second)); len(gone) != 1 || gone[0] != name {
		t.Fatalf("expired %v, want [%s]", gone, name)
	}
	if b.hasGroup(name) || b.svc.Expired.Load() != 1 || len(b.gone) != 1 {
		t.Fatalf("expired consumer's group %v, counter %d", b.reg.Stats(), b.svc.Expired.Load())
	}
	if gone := b.svc.Expire(start.Add(2 * time.Minute)); len(gone) != 1 || gone[0] != "eph2" {
		t.Fatalf("second expiry: %v", gone)
	}
	b.open()
	if got := b.names(); len(got) != 1 || got[0] != "dur" {
		t.Fatalf("durable only after expiries and a restart: %v", got)
	}
}

func TestConsumerBadInput(t *testing.T) {
	b := newBed(t, nil)
	at := b.now.Format(time.RFC3339)
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"stream_name":"TELEMETRY","config":`, CodeInvalidJSON},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","opt_start_time":"yesterday","deliver_policy":"by_start_time"}}`, CodeInvalidJSON},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","deliver_policy":"by_start_time"}}`, CodeInvalidPolicy},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","deliver_policy":"by_start_sequence"}}`, CodeInvalidPolicy},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","deliver_policy":"all","opt_start_seq":5}}`, CodeInvalidPolicy},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","deliver_policy":"by_start_sequence","opt_start_seq":5,"opt_start_time":"` + at + `"}}`, CodeInvalidPolicy},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","deliver_policy":"last"}}`, CodeInvalidPolicy},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"x","inactive_threshold":-5}}`, CodeConsumerCreate},
		{`{"stream_name":"TELEMETRY","config":{"durable_name":"y"}}`, CodeConsumerCreate}, // not the subject's name
	} {
		out := b.call("CONSUMER.CREATE.TELEMETRY.x", c.body)
		if errCode(out) != c.code {
			t.Errorf("%s: %v, want code %d", c.body, out, c.code)
		}
	}
	if out := b.call("CONSUMER.INFO.TELEMETRY.nope", ""); errCode(out) != CodeConsumerNotFound {
		t.Errorf("unknown consumer: %v", out)
	}
	if len(b.names()) != 0 || len(b.reg.Stats()) != 0 {
		t.Fatalf("bad input left %v / %v", b.names(), b.reg.Stats())
	}
}

func TestStartBySeq(t *testing.T) {
	// seq = offset<<11 | partition: records of seq >= 10<<11|2 are offset
	// 10 on in partitions 2.., offset 11 on in partitions 0 and 1.
	f := StartBySeq(StreamSeq(2, 10))
	for p, want := range []uint64{10, 10, 9, 9} {
		if got := f(p); got != want {
			t.Errorf("partition %d: finished %d, want %d", p, got, want)
		}
	}
	if got := StartBySeq(1)(0); got != 0 {
		t.Errorf("seq 1, partition 0: %d", got)
	}
	// Exhaustively against the definition for small values.
	for seq := uint64(1); seq < 5<<SeqPartitionBits; seq += 97 {
		f := StartBySeq(seq)
		for p := range 4 {
			fin := f(p)
			if StreamSeq(p, fin+1) < seq || fin > 0 && StreamSeq(p, fin) >= seq {
				t.Fatalf("seq %d partition %d: finished %d", seq, p, fin)
			}
		}
	}
}

func TestStartByTime(t *testing.T) {
	b := newBed(t, nil)
	rng := rand.New(rand.NewPCG(15, 3))
	base := b.now
	var last time.Duration
	times := map[int][]int64{} // partition -> time of offset i+1
	for i := range 400 {
		last += time.Duration(rng.IntN(3)) * time.Millisecond // equal times too
		dev := fmt.Sprintf("dev-%d", rng.IntN(30))
		pos := b.append(dev, base.Add(last))
		times[pos.Partition] = append(times[pos.Partition], base.Add(last).UnixNano())
		if i == 200 {
			// A move marker in between (a hot device): skipped by the search.
			if _, err := b.log.Move(context.Background(), dev, b.log.HotPartition(dev)); err != nil {
				t.Fatal(err)
			}
			p := b.log.HomePartition(dev)
			times[p] = append(times[p], 0)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for p := range times {
		for b.log.Durable(p) < uint64(len(times[p])) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	for _, d := range []time.Duration{-time.Hour, 0, last / 3, last / 2, last - time.Millisecond, last, last + time.Millisecond, time.Hour} {
		f := StartByTime(b.log, base.Add(d))
		at := base.Add(d).UnixNano()
		for p, ts := range times {
			// Linear answer: the first data record at or after at.
			want := uint64(len(ts))
			for i, tm := range ts {
				if tm != 0 && tm >= at {
					want = uint64(i)
					break
				}
			}
			if got := f(p); got != want {
				t.Errorf("start %v partition %d: finished %d, want %d", d, p, got, want)
			}
		}
	}
	// A consumer by_start_time starts there: its group's committed offsets.
	out := b.create("late", map[string]any{"durable_name": "late", "deliver_policy": "by_start_time", "opt_start_time": base.Add(last / 2).Format(time.RFC3339Nano)})
	if errCode(out) != 0 {
		t.Fatal(out)
	}
	f := StartByTime(b.log, base.Add(last/2))
	for p := range times {
		if off, ok := b.log.Offsets().Get("queue:telemetry.>|late", p); !ok || off != f(p) {
			t.Errorf("partition %d: committed %d %v, want %d", p, off, ok, f(p))
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"version":1,"consumers":[{"name":"a","created":"2026-01-02T03:04:05Z","config":{"name":"a","durable_name":"a","deliver_policy":"all","ack_policy":"explicit"}}]}`))
	f.Add([]byte(`{"version":1,"consumers":[]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := decodeState(b)
		if err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error %v is not ErrBadState", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if !ValidName(e.Name) || e.Config.Name != e.Name || seen[e.Name] {
				t.Fatalf("%q accepted with entry %+v", b, e)
			}
			seen[e.Name] = true
		}
		// What is accepted survives a round trip.
		cs := map[string]*Consumer{}
		for _, e := range entries {
			cs[e.Name] = &Consumer{Name: e.Name, Config: e.Config, Created: e.Created, Ephemeral: e.Ephemeral}
		}
		out, err := encodeState(cs)
		if err != nil {
			return // e.g. a time json cannot write back
		}
		again, err := decodeState(out)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("round trip of %q: %v, %d entries", b, err, len(again))
		}
	})
}
