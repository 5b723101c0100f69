package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"edgeq/bridge/modbus"
	"edgeq/gateway/config"
)

// runModbus is `edgeq modbus read`: poll the devices of the config's
// modbus buses once and print what they answered. Nothing is stored.
func runModbus(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "read" {
		fmt.Fprintln(stderr, "usage: edgeq modbus read --config FILE [--bus NAME] [--json]")
		return 2
	}
	fs := flag.NewFlagSet("modbus read", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", os.Getenv(config.EnvConfigFile), "config file with a modbus: section")
	bus := fs.String("bus", "", "only this bus")
	asJSON := fs.Bool("json", false, "print the records as stored (one JSON line per device)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "edgeq modbus read: --config is required")
		return 2
	}
	cfg, err := config.Load(*path, nil, config.Flags{})
	if err != nil {
		fmt.Fprintf(stderr, "edgeq modbus read: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	code, found := 0, false
	for _, bc := range cfg.Modbus {
		if *bus != "" && bc.Name != *bus {
			continue
		}
		found = true
		readings, err := modbus.ReadOnce(ctx, modbus.Config(bc), logger)
		if err != nil {
			fmt.Fprintf(stderr, "edgeq modbus read: %v\n", err)
			code = 1
			continue
		}
		for _, r := range readings {
			if *asJSON {
				fmt.Fprintf(stdout, "%s\t%s\n", r.Device, r.Record)
			} else {
				printReading(stdout, bc.Name, r)
			}
			if strings.Contains(string(r.Record), `"quality"`) {
				code = 1
			}
		}
	}
	if !found {
		fmt.Fprintf(stderr, "edgeq modbus read: no modbus bus %q in %s\n", *bus, *path)
		return 1
	}
	return code
}

func printReading(w io.Writer, bus string, r modbus.Reading) {
	fmt.Fprintf(w, "%s unit %d → %s\n", bus, r.Unit, r.Device)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tTABLE\tADDRESS\tTYPE\tVALUE\tUNIT")
	for _, v := range r.Values {
		val := fmt.Sprint(v.Value)
		if v.Err != nil {
			val = "error: " + v.Err.Error()
		}
		reg := v.Register
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\n", reg.Name, reg.Function, reg.Address, reg.Type, val, reg.Unit)
	}
	_ = tw.Flush()
}
