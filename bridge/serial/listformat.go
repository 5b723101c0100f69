package serial

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// FormatPorts writes ports as the table of `edgeq serial list`. Use a by-id
// path in the configuration: it survives replugging in another USB socket.
func FormatPorts(w io.Writer, ports []PortInfo) error {
	if len(ports) == 0 {
		_, err := fmt.Fprintln(w, "no serial ports found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tVID:PID\tSERIAL\tMANUFACTURER\tPRODUCT\tDRIVER\tBY-ID")
	for _, p := range ports {
		usb := "-"
		if p.VID != "" {
			usb = p.VID + ":" + p.PID
		}
		byID := "-"
		if len(p.ByID) > 0 {
			byID = strings.Join(p.ByID, " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			p.Path, usb, dash(p.SerialNumber), dash(p.Manufacturer), dash(p.Product), dash(p.Driver), byID)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\t", " ")
}
