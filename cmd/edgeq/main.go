// Command edgeq is the telemetry broker for IoT gateways: the daemon and the
// tools around it. Each subcommand lives in its own file; this one dispatches.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand.
type command struct {
	name, usage string
	run         func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run [--config FILE] [--data DIR] [--nats ADDR] [--http ADDR] [--node-id ID] [--log-level L] [--print-config | --check]\n                             run a node (embedded defaults: ./edgeq-data, NATS 127.0.0.1:4222, HTTP 127.0.0.1:8222)", runRun},
		{"pub", "pub DEVICE [DATA]          publish one message durably (DATA or stdin) and print where it was stored", runPub},
		{"sub", "sub [--queue Q] [SUBJECT]  print deliveries with their headers and ack them", runSub},
		{"status", "status [--json] [--watch [--interval 2s]]\n                             show the node's status (--watch refreshes in place; its terms: docs/glossary.md)", runStatus},
		{"groups", "groups ls [--json] | groups rm [--subject FILTER] NAME\n                             list the queue groups (NATS, JetStream, NSQ, uplinks), or delete one without members", runGroups},
		{"bench", "bench [--mode durable|core|jetstream] [--backlog] [--window N] [--msgs N] [--devices D] [--size B] [--publishers P] [--workers W]\n                             load generator: publish→delivery rate and latency", runBench},
		{"serial", "serial list                list serial ports with USB IDs (read from sysfs, nothing opened)", runSerial},
		{"modbus", "modbus read --config FILE [--bus NAME] [--json]\n                             poll the config's Modbus devices once and print the values (nothing stored)", runModbus},
		{"wal", "wal check DIR [--repair]   inspect (and repair) a data directory", runWal},
		{"version", "version                    print version, commit, build date and architecture", runVersion},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "edgeq: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: edgeq COMMAND [ARGS]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  edgeq %s\n", c.usage)
	}
}
