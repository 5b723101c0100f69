package devicemetrics

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prometheus/procfs"
)

// networkCollector reports bytes and errors received and transmitted per
// interface from <proc>/net/dev (the network namespace of the process, so a
// container's own interfaces).
//
// Cardinality is bounded: with more than maxInterfaces interfaces (Docker
// veths, VPN tunnels) the busiest by rx+tx bytes are kept, so the uplink is
// never the one dropped, and the rest are counted in
// edgeq_device_network_interfaces_omitted.
type networkCollector struct {
	procRoot      string
	maxInterfaces int
}

var _ Collector = networkCollector{}

func (networkCollector) Name() string { return "network" }

const (
	rxBytesName  = "edgeq_device_network_receive_bytes_total"
	rxBytesHelp  = "Bytes received by a network interface."
	txBytesName  = "edgeq_device_network_transmit_bytes_total"
	txBytesHelp  = "Bytes transmitted by a network interface."
	rxErrorsName = "edgeq_device_network_receive_errors_total"
	rxErrorsHelp = "Receive errors of a network interface."
	txErrorsName = "edgeq_device_network_transmit_errors_total"
	txErrorsHelp = "Transmit errors of a network interface."
	ifOmitName   = "edgeq_device_network_interfaces_omitted"
	ifOmitHelp   = "Network interfaces left out because there are more than the configured limit."
)

func (c networkCollector) Collect(dst []Sample) ([]Sample, error) {
	fs, err := openProcFS(c.procRoot)
	if err != nil {
		return dst, err
	}
	dev, err := fs.NetDev()
	if err != nil {
		return dst, fmt.Errorf("read network devices: %w", err)
	}
	kept, omitted := busiestInterfaces(dev, c.maxInterfaces)
	// One run per metric name, interfaces by name within each run.
	metrics := [...]struct {
		name, help string
		value      func(procfs.NetDevLine) uint64
	}{
		{rxBytesName, rxBytesHelp, func(l procfs.NetDevLine) uint64 { return l.RxBytes }},
		{txBytesName, txBytesHelp, func(l procfs.NetDevLine) uint64 { return l.TxBytes }},
		{rxErrorsName, rxErrorsHelp, func(l procfs.NetDevLine) uint64 { return l.RxErrors }},
		{txErrorsName, txErrorsHelp, func(l procfs.NetDevLine) uint64 { return l.TxErrors }},
	}
	for _, m := range metrics {
		for _, l := range kept {
			dst = append(dst, counter(m.name, m.help, float64(m.value(l)), Label{"interface", l.Name}))
		}
	}
	return append(dst, gauge(ifOmitName, ifOmitHelp, float64(omitted))), nil
}

// busiestInterfaces returns at most limit interfaces, the ones with the most
// rx+tx bytes, sorted by name for a stable output order, and how many were
// left out.
func busiestInterfaces(dev procfs.NetDev, limit int) (kept []procfs.NetDevLine, omitted int) {
	lines := make([]procfs.NetDevLine, 0, len(dev))
	for _, l := range dev {
		lines = append(lines, l)
	}
	if len(lines) > limit {
		slices.SortFunc(lines, func(a, b procfs.NetDevLine) int {
			// Descending traffic; the name breaks ties so the choice is stable.
			return cmp.Or(cmp.Compare(b.RxBytes+b.TxBytes, a.RxBytes+a.TxBytes), cmp.Compare(a.Name, b.Name))
		})
		omitted = len(lines) - limit
		lines = lines[:limit]
	}
	slices.SortFunc(lines, func(a, b procfs.NetDevLine) int { return cmp.Compare(a.Name, b.Name) })
	return lines, omitted
}
