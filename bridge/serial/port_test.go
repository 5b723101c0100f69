package serial

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestPortIngestsFormats: json and line frames written to a pty at 115200
// reach the log in order, per device, while garbage, non-UTF-8, oversize
// and device-less frames in between are counted by reason and skipped.
func TestPortIngestsFormats(t *testing.T) {
	oversize := strings.Repeat("x", 5000) // default max_frame is 4096
	tests := []struct {
		format   Format
		frame    func(dev string, i int) string // a valid frame
		payload  func(i int) string             // what the log must hold
		garbage  string
		noDevice string
	}{
		{
			format:   FormatJSON,
			frame:    func(dev string, i int) string { return fmt.Sprintf(`{"id":%q,"n":%d,"t":21.5}`, dev, i) },
			garbage:  `{"id":"m0","n":`,
			noDevice: `{"n":1}`,
		},
		{
			format:   FormatLine,
			frame:    func(dev string, i int) string { return fmt.Sprintf("%s, n=%d ,t=21.5,s=ok", dev, i) },
			payload:  func(i int) string { return fmt.Sprintf(`{"n":%d,"t":21.5,"s":"ok"}`, i) },
			garbage:  "m0,n",
			noDevice: "n=1,t=2",
		},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			s := newSensor(t)
			link := filepath.Join(t.TempDir(), "usb-sensor-if00")
			pointLink(t, link, s.path)
			log := openLog(t)
			cfg := portConfig("fmt-"+string(tt.format), link)
			cfg.Format = tt.format
			cfg.Headers = map[string]string{"site": "plant-1"}
			p := startPort(t, cfg, log)
			waitOpen(t, p, s.path)

			const n = 300
			devices := []string{"m0", "m1", "m2"}
			var stream strings.Builder
			want := map[string][]string{}
			drops := map[string]uint64{}
			for i := range n {
				dev := devices[i%len(devices)]
				frame := tt.frame(dev, i)
				stream.WriteString(frame + "\n")
				if tt.payload != nil {
					want[dev] = append(want[dev], tt.payload(i))
				} else {
					want[dev] = append(want[dev], frame)
				}
				switch i % 50 {
				case 7:
					stream.WriteString(tt.garbage + "\r\n")
					drops["malformed"]++
				case 19:
					stream.WriteString("\xff\xfe" + frame[2:] + "\n")
					drops["non_utf8"]++
				case 23:
					stream.WriteString(oversize + "\n")
					drops["oversize"]++
				case 31:
					stream.WriteString(tt.noDevice + "\n")
					drops["bad_device"]++
				case 42:
					stream.WriteString("\r\n\n") // blank lines are not frames
				}
			}
			// Irregular writes, so frames straddle reads.
			data := stream.String()
			for i := 0; i < len(data); {
				j := min(len(data), i+1+(i*7919)%997)
				s.write(t, data[i:j])
				i = j
			}
			var total uint64
			for _, c := range drops {
				total += c
			}
			waitFor(t, "all frames counted", func() bool { return p.Status().FramesIn == n+total })
			waitStored(t, p, n)
			st := p.Status()
			for reason, c := range drops {
				if st.Dropped[reason] != c {
					t.Errorf("dropped[%s] = %d, want %d (%v)", reason, st.Dropped[reason], c, st.Dropped)
				}
			}
			if st.StorageErrors != 0 || st.Dropped["incomplete"] != 0 {
				t.Errorf("status %+v", st)
			}
			checkAccounting(t, st)

			got := byDevice(t, readAll(t, log))
			for _, dev := range devices {
				recs := got[dev]
				if len(recs) != len(want[dev]) {
					t.Fatalf("device %s: %d records, want %d", dev, len(recs), len(want[dev]))
				}
				for i, r := range recs {
					if string(r.Payload) != want[dev][i] {
						t.Fatalf("device %s record %d: payload %s, want %s", dev, i, r.Payload, want[dev][i])
					}
					if r.Source != "serial:"+cfg.Name || len(r.Headers) != 1 || r.Headers[0].Value != "plant-1" {
						t.Fatalf("record source %q headers %v", r.Source, r.Headers)
					}
					if !json.Valid(r.Payload) {
						t.Fatalf("payload %s is not JSON", r.Payload)
					}
				}
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := portConfig("x", "relative/path")
	if _, err := New(cfg, openLog(t), nil); err == nil || !strings.Contains(err.Error(), "serial[x].path") {
		t.Fatalf("New with a relative path: %v", err)
	}
	if _, err := New(portConfig("x", "/dev/ttyUSB0"), nil, nil); err == nil {
		t.Fatal("New with a nil appender: nil error")
	}
}
