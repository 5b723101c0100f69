package nsqserver

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"edgeq/gateway/groups"
)

// httpMPUB is the binary /mpub body: MPUB's without its own size.
func httpMPUB(msgs ...string) string {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(msgs)))
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return string(b)
}

// TestHTTPPublish: /pub and /mpub store what they answer OK for (read back
// from the log), and refuse as nsqd does, with edgeq's reason where nsqd
// has none.
func TestHTTPPublish(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxMsgSize, c.MaxBodySize = 64, 256 })
	h := &HTTP{Server: r.s, Started: time.Now()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pub", h.Pub)
	mux.HandleFunc("POST /mpub", h.MPub)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		path, body string
		code       int
		want       string // the body, or the start of the message
		stored     int
	}{
		{"/pub?topic=telemetry.d1", "one", 200, "OK", 1},
		{"/mpub?topic=telemetry.d2", "a\n\nb\n", 200, "OK", 2},
		{"/mpub?topic=telemetry&binary=true", httpMPUB(`{"device":"d3"}`, `{"device":"d4"}`), 200, "OK", 2},
		{"/pub", "x", 400, "MISSING_ARG_TOPIC", 0},
		{"/pub?topic=a%20b", "x", 400, "INVALID_TOPIC", 0},
		{"/pub?topic=nsq", "x", 400, "INVALID_TOPIC: topic \"nsq\" is not served", 0},
		{"/pub?topic=telemetry", "{}", 400, "BAD_MESSAGE: no device ID", 0},
		{"/pub?topic=telemetry.d1", "", 400, "MSG_EMPTY", 0},
		{"/pub?topic=telemetry.d1&defer=10", "x", 400, "INVALID_DEFER", 0},
		{"/pub?topic=telemetry.d1", strings.Repeat("x", 65), 413, "MSG_TOO_BIG", 0},
		{"/mpub?topic=telemetry.d1", strings.Repeat("x", 65) + "\n", 413, "MSG_TOO_BIG", 0},
		{"/mpub?topic=telemetry.d1", strings.Repeat("x\n", 129), 413, "BODY_TOO_BIG", 0},
		{"/mpub?topic=telemetry.d1", "\n\n", 400, "MSG_EMPTY", 0},
		{"/mpub?topic=telemetry", "{\"device\":\"d5\"}\nnope\n", 400, "BAD_MESSAGE: message 1", 0},
		{"/mpub?topic=telemetry.d1&binary=true", "\x00\x00\x00", 413, "BAD_BODY", 0},
		{"/mpub?topic=telemetry.d1&binary=1", "\x00\x00\x00\x01\x00\x00\x00\x09ab", 413, "BAD_MESSAGE", 0},
	} {
		before := r.s.Counters().Published.Load()
		resp, err := http.Post(srv.URL+tc.path, "application/octet-stream", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(b)
		if tc.code != 200 {
			var e struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &e) != nil {
				t.Fatalf("%s: not nsqd's error shape: %s", tc.path, b)
			}
			got = e.Message
		}
		if resp.StatusCode != tc.code || !strings.HasPrefix(got, tc.want) || resp.Header.Get("X-NSQ-Content-Type") != "nsq; version=1.0" {
			t.Fatalf("%s %q: %d %q, want %d %q", tc.path, tc.body, resp.StatusCode, got, tc.code, tc.want)
		}
		if n := r.s.Counters().Published.Load() - before; n != uint64(tc.stored) {
			t.Fatalf("%s: %d stored, want %d", tc.path, n, tc.stored)
		}
	}
}

// TestHTTPStats: a channel's figures in nsqd's shape, the telemetry topic
// always there, ?topic= and &channel= select.
func TestHTTPStats(t *testing.T) {
	r := newRig(t, nil)
	h := &HTTP{Server: r.s, Started: time.Now(), Stored: func() uint64 { return 7 }}
	for _, k := range []groups.GroupKey{{Filter: "telemetry.>", Queue: "a"}, {Filter: "telemetry.>", Queue: "b"}, {Filter: "telemetry.d1", Queue: "c"}} {
		if err := r.reg.Declare(groups.GroupConfig{Key: k, Core: groups.DefaultCoreConfig()}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(q string) []TopicStats {
		rec := httptest.NewRecorder()
		h.Stats(rec, httptest.NewRequest("GET", "/stats?format=json"+q, nil))
		var ans struct {
			Health string       `json:"health"`
			Topics []TopicStats `json:"topics"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); rec.Code != 200 || err != nil || ans.Health != "OK" {
			t.Fatalf("stats%s: %d %v %s", q, rec.Code, err, rec.Body)
		}
		return ans.Topics
	}
	all := get("")
	if len(all) != 2 || all[0].TopicName != "telemetry" || len(all[0].Channels) != 2 || all[0].MessageCount != 7 ||
		all[1].TopicName != "telemetry.d1" || len(all[1].Channels) != 1 || all[1].Channels[0].ChannelName != "c" {
		t.Fatalf("all topics: %+v", all)
	}
	if one := get("&topic=telemetry&channel=b"); len(one) != 1 || len(one[0].Channels) != 1 || one[0].Channels[0].ChannelName != "b" {
		t.Fatalf("topic and channel: %+v", one)
	}
	if none := get("&topic=other"); len(none) != 0 {
		t.Fatalf("an unknown topic: %+v", none)
	}
	rec := httptest.NewRecorder()
	h.Stats(rec, httptest.NewRequest("GET", "/stats", nil))
	if !strings.Contains(rec.Body.String(), "[a ") || !strings.Contains(rec.Body.String(), "[telemetry.d1") {
		t.Fatalf("text stats:\n%s", rec.Body)
	}
}

func TestChannelStats(t *testing.T) {
	g := groups.GroupStats{Key: groups.GroupKey{Filter: "telemetry.>", Queue: "ch"}, Members: map[string]int{"n1": 2, "n2": 1},
		Durable: map[int]uint64{0: 10, 1: 5}}
	g.Core.InFlight, g.Core.Acked, g.Core.Terms, g.Core.Naks, g.Core.LeaveRequeue, g.Core.Timeouts = 3, 20, 1, 2, 1, 4
	g.Core.Partitions = []groups.PartitionStats{{Partition: 0, Committed: 4}, {Partition: 1, Committed: 5}}
	c := channelStats(&g)
	// lag 6 (+0), of which 3 in flight: depth 3
	if c.Depth != 3 || c.BackendDepth != 3 || c.InFlightCount != 3 || c.MessageCount != 20+1+3+3 || c.RequeueCount != 3 ||
		c.TimeoutCount != 4 || c.ClientCount != 3 {
		t.Fatalf("%+v", c)
	}
}

func TestTopicOfFilter(t *testing.T) {
	s := &Server{cfg: Config{TelemetryPrefix: "telemetry"}}
	for filter, want := range map[string]string{"telemetry.>": "telemetry", "telemetry.d1": "telemetry.d1", "telemetry.*": "", "other.>": "", "telemetry.a:b": ""} {
		got, ok := s.topicOfFilter(filter)
		if got != want || ok != (want != "") {
			t.Fatalf("%s: %q %v, want %q", filter, got, ok, want)
		}
	}
}

func TestHTTPChannelDelete(t *testing.T) {
	r := newRig(t, nil)
	var asked []string
	h := &HTTP{Server: r.s, Started: time.Now(), DeleteChannel: func(filter, channel string) error {
		asked = append(asked, filter+" "+channel)
		switch channel {
		case "none":
			return fmt.Errorf("%w: none", ErrChannelNotFound)
		case "busy":
			return fmt.Errorf("has 1 on n1")
		}
		return nil
	}}
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"topic=telemetry&channel=c", 200, ""},
		{"topic=telemetry.d1&channel=c", 200, ""},
		{"topic=telemetry&channel=none", 404, `{"message":"CHANNEL_NOT_FOUND"}`},
		{"topic=telemetry&channel=busy", 409, `{"message":"CHANNEL_IN_USE: has 1 on n1"}`},
		{"topic=other&channel=c", 404, `{"message":"TOPIC_NOT_FOUND"}`},
		{"channel=c", 400, `{"message":"MISSING_ARG_TOPIC"}`},
		{"topic=telemetry&channel=a%20b", 400, `{"message":"INVALID_ARG_CHANNEL"}`},
	} {
		rec := httptest.NewRecorder()
		h.ChannelDelete(rec, httptest.NewRequest("POST", "/channel/delete?"+tc.query, nil))
		if rec.Code != tc.code || rec.Body.String() != tc.want {
			t.Fatalf("%s: %d %s, want %d %s", tc.query, rec.Code, rec.Body, tc.code, tc.want)
		}
	}
	if len(asked) != 4 || asked[0] != "telemetry.> c" || asked[1] != "telemetry.d1 c" {
		t.Fatalf("asked %v", asked)
	}
}
