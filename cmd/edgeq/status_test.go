package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/gateway/apiv1"
)

// statusAt is a node's status at t seconds: a group that delivered 10 and
// acked 8 messages per second so far, and CPU seconds that grow a quarter
// busy.
func statusAt(t float64) *apiv1.Status {
	busy, total, cpus := 100+0.5*t, 1000+2*t, 2
	load := 0.5
	return &apiv1.Status{
		Node: "gw", Ready: true, Time: time.Unix(1000, 0).Add(time.Duration(t * float64(time.Second))),
		Partitions: []apiv1.PartitionStatus{{Partition: 0, Appends: uint64(100 + 10*t)}},
		Groups:     []apiv1.GroupStatus{{Filter: "telemetry.>", Queue: "q", Delivered: uint64(10 * t), Acked: uint64(8 * t), Lag: 7}},
		Sources:    map[string]apiv1.Source{"nats": {Msgs: uint64(100 + 10*t)}, "http": {Msgs: 3}},
		Device: apiv1.DeviceHealth{CPUBusySeconds: &busy, CPUTotalSeconds: &total, CPUs: &cpus,
			Load1: &load, Load5: &load, Load15: &load,
			Temperatures: []apiv1.Temperature{{Zone: "0", Type: "cpu-thermal", Celsius: 51.25}}},
	}
}

// TestPrintStatusRates: rates come from two readings over the node's clock;
// a first reading, or a counter that went backwards, has none.
func TestPrintStatusRates(t *testing.T) {
	restarted := statusAt(4)
	restarted.Groups[0].Delivered, restarted.Groups[0].Acked = 1, 1
	tests := []struct {
		name      string
		prev, cur *apiv1.Status
		want      []string // regexps, each must match a line
	}{
		{"first reading", nil, statusAt(2), []string{
			`^telemetry\.>\s+q\s+0\s+0\s+0\s+7\s+-\s+-\s+20\s+16\s`,
			`^device cpu - of 2  load 0\.50 0\.50 0\.50  temp 51\.2°C \(cpu-thermal\)  mem \?  disk \?`,
			`^source nats\s+120 msgs \(-/s\)`,
		}},
		{"two seconds later", statusAt(2), statusAt(4), []string{
			`^telemetry\.>\s+q\s+0\s+0\s+0\s+7\s+10\.0\s+8\.0\s+40\s+32\s`,
			`^device cpu 25% of 2 `,
			`^0\s+\d+\s+\d+\s+\d+\s+\S+\s+140\s+10\.0\s`,
			`^source http\s+3 msgs \(0\.0/s\)`,
			`^source nats\s+140 msgs \(10\.0/s\)`,
		}},
		{"node restarted", statusAt(2), restarted, []string{
			`^telemetry\.>\s+q\s+0\s+0\s+0\s+7\s+-\s+-\s+1\s+1\s`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printStatus(&b, tt.cur, tt.prev)
			for _, re := range tt.want {
				if !regexp.MustCompile(`(?m)` + re).MatchString(b.String()) {
					t.Errorf("no line matches %s in:\n%s", re, b.String())
				}
			}
		})
	}
}

// TestWatchStatus: --watch refreshes count times; on a terminal every frame
// starts with cursor-home and clear, elsewhere frames are plain text
// separated by blank lines; the second frame has rates; a failed fetch is
// a line in the frame, not the end of the watch.
func TestWatchStatus(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := calls.Add(1)
		if n == 2 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(statusAt(float64(2 * n)))
	}))
	defer srv.Close()
	tests := []struct {
		name        string
		tty         bool
		wantClears  int
		wantBlankSe bool
	}{
		{"pipe", false, 0, true},
		{"terminal", true, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			var out bytes.Buffer
			c := statusClient{url: srv.URL, client: srv.Client()}
			watchStatus(context.Background(), c, &out, tt.tty, false, time.Millisecond, 3)
			s := out.String()
			if got := strings.Count(s, clearHome); got != tt.wantClears {
				t.Errorf("%d clear-screens, want %d", got, tt.wantClears)
			}
			if !tt.tty && strings.Contains(s, "\x1b") {
				t.Error("escape codes in plain output")
			}
			if got := strings.Count(s, "node gw  ready"); got != 2 {
				t.Errorf("%d status frames, want 2 (the second fetch failed):\n%s", got, s)
			}
			if !strings.Contains(s, "500 Internal Server Error: boom (trying again every 1ms)") {
				t.Errorf("the failed fetch is not shown:\n%s", s)
			}
			// Frame 3 (t=6s) rates against frame 1 (t=2s): 10 delivered/s.
			if !regexp.MustCompile(`(?m)^telemetry\.>\s+q\s+0\s+0\s+0\s+7\s+10\.0\s+8\.0\s+60\s+48\s`).MatchString(s) {
				t.Errorf("no rates in the last frame:\n%s", s)
			}
			if tt.wantBlankSe && !strings.Contains(s, "\n\nnode gw") {
				t.Error("plain frames are not separated by a blank line")
			}
		})
	}
}

// TestPrintStatusUplinks: the UPLINK table shows the lag in records and
// bytes on the node that leads the uplink's group, and "-" on one that does
// not (its zeros would read as "nothing to send").
func TestPrintStatusUplinks(t *testing.T) {
	st := statusAt(2)
	st.Uplinks = []apiv1.UplinkStatus{
		{Name: "cloud", Type: "nats", State: "up", Leading: true, LagRecords: 1200, LagBytes: 3 << 20, Held: 3, Window: 256, Acked: 97},
		{Name: "lake", Type: "http", State: "up", Leading: false, Held: 0, Window: 100, Acked: 5},
	}
	var b bytes.Buffer
	printStatus(&b, st, nil)
	for _, re := range []string{
		`^UPLINK\s+TYPE\s+STATE\s+LAG\s+LAG BYTES\s+HELD/WINDOW\s`,
		`^cloud\s+nats\s+up\s+1200\s+3\.0MiB\s+3/256\s+0\.0s\s+97\s`,
		`^lake\s+http\s+up\s+-\s+-\s+0/100\s+0\.0s\s+5\s`,
	} {
		if !regexp.MustCompile(`(?m)` + re).MatchString(b.String()) {
			t.Errorf("no line matches %s in:\n%s", re, b.String())
		}
	}
}

// TestPrintStatusFullLog: the log line shows full_policy, the records
// retention dropped before every consumer had them, a full log and a low
// disk.
func TestPrintStatusFullLog(t *testing.T) {
	tests := []struct {
		log  apiv1.LogStatus
		want string
	}{
		{apiv1.LogStatus{Bytes: 1 << 20, MaxBytes: 1 << 20, FullPolicy: "reject", Full: true},
			`^log 1\.0MiB of 1\.0MiB, 0 devices, full_policy reject  FULL \(rejecting\)$`},
		{apiv1.LogStatus{Bytes: 1 << 20, MaxBytes: 1 << 20, FullPolicy: "drop_oldest", RetentionDropped: 2977, DiskLow: true},
			`^log 1\.0MiB of 1\.0MiB, 0 devices, full_policy drop_oldest, 2977 unconsumed records dropped  DISK LOW`},
	}
	for _, tt := range tests {
		st := statusAt(1)
		st.Log = tt.log
		var b bytes.Buffer
		printStatus(&b, st, nil)
		if !regexp.MustCompile(`(?m)` + tt.want).MatchString(b.String()) {
			t.Errorf("status lacks %s:\n%s", tt.want, b.String())
		}
	}
}
