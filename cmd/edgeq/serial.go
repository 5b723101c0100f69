package main

import (
	"flag"
	"fmt"
	"io"

	"edgeq/bridge/serial"
)

func runSerial(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintln(stderr, "usage: edgeq serial list [--sys /sys] [--dev /dev]")
		return 2
	}
	fs := flag.NewFlagSet("serial list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sys := fs.String("sys", "/sys", "sysfs root")
	dev := fs.String("dev", "/dev", "device root")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	// Read from sysfs only: no port is opened (opening reconfigures a UART).
	ports, err := serial.ListPorts(*sys, *dev)
	if err != nil {
		fmt.Fprintf(stderr, "edgeq serial list: %v\n", err)
		return 1
	}
	if err := serial.FormatPorts(stdout, ports); err != nil {
		fmt.Fprintf(stderr, "edgeq serial list: %v\n", err)
		return 1
	}
	return 0
}
