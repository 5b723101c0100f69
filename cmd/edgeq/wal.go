package main

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"edgeq/wal"
)

func runWal(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: edgeq wal check DIR [--repair]")
		return 2
	}
	fs := flag.NewFlagSet("wal check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repair := fs.Bool("repair", false, "repair torn and garbage tails (the node must be stopped)")
	// Accept the directory before or after the flags.
	rest := args[1:]
	var dir string
	if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		dir, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if dir == "" {
		fmt.Fprintln(stderr, "usage: edgeq wal check DIR [--repair]")
		return 2
	}
	rep, err := wal.Check(dir, wal.DefaultOptions(), *repair)
	if err != nil {
		fmt.Fprintf(stderr, "edgeq wal check: %v\n", err)
		return 1
	}
	printCheck(stdout, rep)
	for _, p := range rep.Partitions {
		if !p.Healthy() && !*repair {
			return 1
		}
	}
	return 0
}

func printCheck(w io.Writer, rep wal.CheckReport) {
	fmt.Fprintf(w, "data directory %s", rep.Dir)
	if rep.InUse {
		fmt.Fprint(w, " (in use by a running node: figures may lag)")
	}
	if rep.Repaired {
		fmt.Fprint(w, " (repaired)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "partition\tsegments\tbytes\trecords\tfirst\tlast\tdevices\tmoves\tbad\ttorn bytes\tunreadable segs\tstatus\t")
	for _, p := range rep.Partitions {
		status := "ok"
		if !p.Healthy() {
			status = "NEEDS REPAIR"
			if p.BadRecords > p.BadTail && p.TornBytes == 0 && p.Unreadable == 0 {
				status = "bad records skipped"
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.Partition, p.Segments, p.Bytes,
			p.Records, p.First, p.Last, p.Devices, p.MoveMarkers, p.BadRecords, p.TornBytes, p.Unreadable, status)
	}
	tw.Flush()
}
