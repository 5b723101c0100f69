package devicemetrics

import (
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

func TestNetworkCollectorOnFixture(t *testing.T) {
	// testdata/proc/net/dev: lo, eth0, wlan0, docker0.
	tests := []struct {
		name  string
		limit int
		want  string
	}{
		{
			name: "all interfaces, by name", limit: 32,
			want: `counter edgeq_device_network_receive_bytes_total{interface="docker0"} 0
counter edgeq_device_network_receive_bytes_total{interface="eth0"} 1820384112
counter edgeq_device_network_receive_bytes_total{interface="lo"} 9034321
counter edgeq_device_network_receive_bytes_total{interface="wlan0"} 38120001
counter edgeq_device_network_transmit_bytes_total{interface="docker0"} 0
counter edgeq_device_network_transmit_bytes_total{interface="eth0"} 402338761
counter edgeq_device_network_transmit_bytes_total{interface="lo"} 9034321
counter edgeq_device_network_transmit_bytes_total{interface="wlan0"} 8123399
counter edgeq_device_network_receive_errors_total{interface="docker0"} 0
counter edgeq_device_network_receive_errors_total{interface="eth0"} 3
counter edgeq_device_network_receive_errors_total{interface="lo"} 0
counter edgeq_device_network_receive_errors_total{interface="wlan0"} 17
counter edgeq_device_network_transmit_errors_total{interface="docker0"} 0
counter edgeq_device_network_transmit_errors_total{interface="eth0"} 0
counter edgeq_device_network_transmit_errors_total{interface="lo"} 0
counter edgeq_device_network_transmit_errors_total{interface="wlan0"} 2
gauge edgeq_device_network_interfaces_omitted 0
`,
		},
		{
			name: "over the limit the busiest are kept", limit: 2,
			want: `counter edgeq_device_network_receive_bytes_total{interface="eth0"} 1820384112
counter edgeq_device_network_receive_bytes_total{interface="wlan0"} 38120001
counter edgeq_device_network_transmit_bytes_total{interface="eth0"} 402338761
counter edgeq_device_network_transmit_bytes_total{interface="wlan0"} 8123399
counter edgeq_device_network_receive_errors_total{interface="eth0"} 3
counter edgeq_device_network_receive_errors_total{interface="wlan0"} 17
counter edgeq_device_network_transmit_errors_total{interface="eth0"} 0
counter edgeq_device_network_transmit_errors_total{interface="wlan0"} 2
gauge edgeq_device_network_interfaces_omitted 2
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := collectOK(t, networkCollector{procRoot: fixtureProc, maxInterfaces: tt.limit})
			assertRendered(t, got, tt.want)
		})
	}
}

func TestBusiestInterfaces(t *testing.T) {
	dev := procfs.NetDev{
		"veth1": {Name: "veth1", RxBytes: 10},
		"veth0": {Name: "veth0", RxBytes: 10}, // ties with veth1: name decides
		"wlan0": {Name: "wlan0", RxBytes: 5, TxBytes: 500},
		"eth0":  {Name: "eth0", TxBytes: 1},
	}
	tests := []struct {
		limit       int
		wantNames   string
		wantOmitted int
	}{
		{limit: 4, wantNames: "eth0,veth0,veth1,wlan0", wantOmitted: 0},
		{limit: 10, wantNames: "eth0,veth0,veth1,wlan0", wantOmitted: 0},
		{limit: 2, wantNames: "veth0,wlan0", wantOmitted: 2},
		{limit: 1, wantNames: "wlan0", wantOmitted: 3},
		{limit: 0, wantNames: "", wantOmitted: 4},
	}
	for _, tt := range tests {
		kept, omitted := busiestInterfaces(dev, tt.limit)
		names := make([]string, len(kept))
		for i, l := range kept {
			names[i] = l.Name
		}
		if got := strings.Join(names, ","); got != tt.wantNames || omitted != tt.wantOmitted {
			t.Errorf("limit %d: kept %q, omitted %d; want %q, %d", tt.limit, got, omitted, tt.wantNames, tt.wantOmitted)
		}
	}
}
