package devicemetrics

import (
	"errors"
	"testing"
)

func TestParseUptime(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		wantErr bool
	}{
		{text: "86400.25 331200.80", want: 86400.25},
		{text: "0.00 0.00\n", want: 0},
		{text: "  12.5   3.0  ", want: 12.5},
		{text: "", wantErr: true},
		{text: "12.5", wantErr: true},
		{text: "12.5 3.0 7", wantErr: true},
		{text: "abc 12", wantErr: true},
		{text: "-1.0 2.0", wantErr: true},
		{text: "NaN 2.0", wantErr: true},
		{text: "+Inf 2.0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := parseUptime(tt.text)
			if tt.wantErr {
				if !errors.Is(err, errMalformedUptime) {
					t.Fatalf("parseUptime(%q) err = %v, want errMalformedUptime", tt.text, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseUptime(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
			}
		})
	}
}

func TestUptimeCollectorOnFixture(t *testing.T) {
	got := collectOK(t, uptimeCollector{procRoot: fixtureProc})
	assertRendered(t, got, "gauge edgeq_device_uptime_seconds 86400.25\n")
}
