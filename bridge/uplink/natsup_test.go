package uplink

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// TestNATSOrder plays the records of devices through natsOrder as the
// group (with a device window) and the uplink hand them over: a record is
// let through only when it cannot overtake an earlier one of its device
// upstream.
func TestNATSOrder(t *testing.T) {
	type step struct {
		op   string // send (want: let through?), ok, fail: the answer of a sent record
		dev  string
		seq  uint64
		conn uint64
		want bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order on one connection, after a probe", []step{
			{"send", "a", 1, 0, true}, {"send", "a", 2, 0, false}, // one at a time until one is acked here
			{"send", "b", 1, 0, true},
			{"ok", "a", 1, 0, false},
			{"send", "a", 2, 0, true}, // the group's restart
			{"send", "a", 3, 0, true}, {"send", "a", 4, 0, true},
			{"ok", "a", 2, 0, false}, {"send", "a", 5, 0, true}, {"ok", "a", 3, 0, false},
		}},
		{"behind a failure: handed back until the restart", []step{
			{"send", "a", 1, 0, true}, {"ok", "a", 1, 0, false},
			{"send", "a", 2, 0, true}, {"send", "a", 3, 0, true},
			{"fail", "a", 2, 0, false},
			{"send", "a", 4, 0, false}, // delivered before the group learnt of the failure
			{"send", "b", 1, 0, true},  // another device goes on
			{"ok", "a", 3, 0, false},
			{"send", "a", 5, 0, false}, // still of the old run: above every record seen
			{"send", "a", 2, 0, true},  // the restart, from the oldest unfinished
			{"send", "a", 4, 0, true},
		}},
		{"a new connection: in flight on the old one, then a probe", []step{
			{"send", "a", 1, 0, true}, {"ok", "a", 1, 0, false}, {"send", "a", 2, 0, true},
			{"send", "b", 1, 1, true}, // nothing of b in flight
			{"send", "a", 3, 1, false},
			{"send", "a", 4, 1, false},
			{"fail", "a", 2, 0, false}, // timed out with the old connection
			{"send", "a", 2, 1, true},
			{"send", "a", 3, 1, false}, // acknowledged on the old connection only: a probe first
			{"ok", "a", 2, 1, false},
			{"send", "a", 3, 1, true}, {"send", "a", 4, 1, true},
		}},
		{"a stream that refuses, then accepts: never two of a device meanwhile", []step{
			{"send", "a", 1, 0, true}, {"send", "a", 2, 0, false},
			{"fail", "a", 1, 0, false},
			{"send", "a", 1, 0, true}, {"send", "a", 2, 0, false},
			{"fail", "a", 1, 0, false},
			{"send", "a", 1, 0, true}, {"send", "a", 2, 0, false},
			{"ok", "a", 1, 0, false},
			{"send", "a", 2, 0, true}, {"send", "a", 3, 0, true},
		}},
		{"the restart fails at once: its followers are handed back, whatever the last round saw", []step{
			{"send", "a", 1, 0, true}, {"send", "a", 2, 0, false}, {"send", "a", 3, 0, false},
			{"fail", "a", 1, 0, false},
			{"send", "a", 1, 0, true}, {"fail", "a", 1, 0, false}, // the restart; the upstream is still down
			{"send", "a", 2, 0, false}, // at or below the last round's highest, but behind the failed restart
			{"send", "a", 3, 0, false},
			{"send", "a", 1, 0, true},
		}},
		{"the restart while retention took the failed records", []step{
			{"send", "a", 1, 0, true}, {"fail", "a", 1, 0, false},
			{"send", "a", 2, 0, false}, // the oldest left after retention, taken for a late one
			{"send", "a", 2, 0, true},  // the group's next round: at or below what was seen
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &natsOrder{devs: map[devID]*natsDev{}}
			for i, s := range tt.steps {
				it := &Item{Node: "n1", Device: s.dev, Seq: s.seq}
				switch s.op {
				case "send":
					if got := o.send(it, s.conn); got != s.want {
						t.Fatalf("step %d: send %s#%d on connection %d: %v, want %v", i, s.dev, s.seq, s.conn, got, s.want)
					}
				case "ok", "fail":
					o.done(it, s.op == "ok")
				}
			}
			for k, d := range o.devs {
				if d.flying < 0 {
					t.Errorf("device %v: %d in flight", k, d.flying)
				}
			}
		})
	}
	t.Run("bound", func(t *testing.T) {
		o := &natsOrder{devs: map[devID]*natsDev{}}
		for i := range 3 * maxOrderDevices {
			it := &Item{Node: "n1", Device: fmt.Sprintf("d%d", i), Seq: 1}
			if !o.send(it, 0) {
				t.Fatalf("device %d: first record refused", i)
			}
			o.done(it, true)
			if len(o.devs) > maxOrderDevices {
				t.Fatalf("%d devices tracked, bound %d", len(o.devs), maxOrderDevices)
			}
		}
	})
}

func TestNATSHeaders(t *testing.T) {
	tr := &natsTransport{}
	it := &Item{Node: "n1", Device: "d1", Seq: 7, Time: 42, Source: "mqtt",
		Headers: []wal.Header{{Key: "X-A", Value: "1"}, {Key: "X-A", Value: "2"}, {Key: "X-B", Value: "3"}}}
	h := tr.headers(it)
	want := map[string][]string{"X-A": {"1", "2"}, "X-B": {"3"}, "Edgeq-Node": {"n1"}, "Edgeq-Device": {"d1"},
		"Edgeq-Seq": {"7"}, "Edgeq-Time": {"42"}, "Edgeq-Source": {"mqtt"}, jetstream.MsgIDHeader: {"n1:d1:7"}}
	if len(h) != len(want) {
		t.Fatalf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if strings.Join(h[k], ",") != strings.Join(v, ",") {
			t.Errorf("%s: %q, want %q", k, h[k], v)
		}
	}
	// The single-value slices share an array: appending to one must not overwrite another.
	h["Edgeq-Node"] = append(h["Edgeq-Node"], "x")
	if h.Get("Edgeq-Device") != "d1" {
		t.Fatalf("append to one header changed another: %v", h)
	}
}

func TestDeviceWindowConfig(t *testing.T) {
	base := func(typ string) Config {
		c := DefaultConfig()
		c.Name, c.Type = "up", typ
		c.NATS = NATSConfig{URL: "nats://127.0.0.1:4222", Subject: "p.{device}"}
		c.HTTP.URL = "http://127.0.0.1:1"
		c.MQTT = MQTTConfig{Broker: "tcp://127.0.0.1:1", Topic: "p/{device}"}
		return c
	}
	tests := []struct {
		typ    string
		window int
		want   int    // effective
		err    string // "" = valid
	}{
		{TypeNATS, 0, 1, ""}, // the default never lets a record overtake a refused one
		{TypeNATS, 1, 1, ""},
		{TypeNATS, 64, 64, ""},
		{TypeNATS, MaxDeviceWindow + 1, 0, "device_window"},
		{TypeNATS, -1, 0, "device_window"},
		{TypeMQTT, 0, 1, ""},
		{TypeMQTT, 1, 1, ""},
		{TypeMQTT, 2, 0, "uplinks[0].device_window: 2: a mqtt uplink"},
		{TypeHTTP, 0, 1, ""},
		{TypeHTTP, 4, 0, "uplinks[0].device_window: 4: a http uplink"},
	}
	for _, tt := range tests {
		c := base(tt.typ)
		c.DeviceWindow = tt.window
		err := c.Validate("uplinks[0]")
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s device_window %d: %v", tt.typ, tt.window, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s device_window %d: err %v, want one naming %q", tt.typ, tt.window, err, tt.err)
		case tt.err == "" && c.EffectiveDeviceWindow() != tt.want:
			t.Errorf("%s device_window %d: effective %d, want %d", tt.typ, tt.window, c.EffectiveDeviceWindow(), tt.want)
		}
	}
}

// backPipe hands back offset 2 unsent and acknowledges the others.
type backPipe struct{}

func (backPipe) Start(it *Item) Pending {
	if it.Offset == 2 {
		return failed{Result{Outcome: Back, Err: errBehind}}
	}
	return failed{Result{Outcome: OK}}
}
func (backPipe) Connected() bool { return true }
func (backPipe) Close()          {}

// TestHandedBackNakedAtOnce: a record the transport hands back unsent is
// naked without delay and is not an upstream failure.
func TestHandedBackNakedAtOnce(t *testing.T) {
	ack := &fakeAcker{}
	u := New(testConfig(), backPipe{}, ack, quiet, nil)
	go u.Run(context.Background())
	defer u.Close()
	for off := uint64(1); off <= 3; off++ {
		if !u.Deliver(delivery(off, "d", 1)) {
			t.Fatal("delivery refused")
		}
	}
	waitUntil(t, "3 answers", func() bool { return ack.count() == 3 })
	ack.mu.Lock()
	for _, a := range ack.acks {
		want := groups.AckDone
		if a.Handle.Offset == 2 {
			want = groups.AckNak
		}
		if a.Kind != want || a.Delay != 0 {
			t.Errorf("offset %d: %v delay %v, want %v without delay", a.Handle.Offset, a.Kind, a.Delay, want)
		}
	}
	ack.mu.Unlock()
	if s := u.Stats(); s.Acked != 2 || s.Failed != 0 || s.Retried != 1 || s.Held != 0 {
		t.Errorf("stats %+v", s)
	}
}
