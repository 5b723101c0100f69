package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"edgeq/gateway"
)

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("http", envOr("EDGEQ_HTTP", "http://127.0.0.1:8222"), "HTTP address of the node (also $EDGEQ_HTTP)")
	token := fs.String("token", os.Getenv("EDGEQ_HTTP_TOKEN"), "bearer token (also $EDGEQ_HTTP_TOKEN)")
	raw := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	req, err := http.NewRequest("GET", *url+"/v1/status", nil)
	if err != nil {
		fmt.Fprintf(stderr, "edgeq status: %v\n", err)
		return 2
	}
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "edgeq status: %v (is the node running? see --http)\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "edgeq status: %s: %s\n", resp.Status, body)
		return 1
	}
	if *raw {
		stdout.Write(body)
		return 0
	}
	var st gateway.Status
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintf(stderr, "edgeq status: %v\n", err)
		return 1
	}
	printStatus(stdout, &st)
	return 0
}

func printStatus(w io.Writer, st *gateway.Status) {
	ready := "ready"
	if !st.Ready {
		ready = "NOT READY"
	}
	fmt.Fprintf(w, "node %s  %s  up %s  version %s\n", st.Node, ready, time.Duration(st.UptimeSeconds)*time.Second, st.Version)
	fmt.Fprintf(w, "nats %s  http %s  data %s  durability %s\n", st.NATS, st.HTTP, st.DataDir, st.Durability)
	full := ""
	if st.Log.Full {
		full = "  FULL (rejecting)"
	}
	fmt.Fprintf(w, "log %s of %s, %d devices%s\n\n", human(st.Log.Bytes), human(st.Log.MaxBytes), st.Log.Devices, full)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tFIRST\tLAST\tDURABLE\tSIZE\tAPPENDS\tFSYNCS")
	for _, p := range st.Partitions {
		name := fmt.Sprint(p.Partition)
		if p.Hot {
			name += " (hot)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\n", name, p.First, p.Last, p.Durable, human(p.Bytes), p.Appends, p.Fsyncs)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(st.Groups) == 0 {
		fmt.Fprintln(w, "no queue groups")
	} else {
		fmt.Fprintln(tw, "GROUP\tQUEUE\tMEMBERS\tIN FLIGHT\tLAG\tDELIVERED\tACKED\tREDELIVERED\tDEAD\tP50\tP99")
		for _, g := range st.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0fms\t%.0fms\n", g.Filter, g.Queue, g.Members, g.InFlight,
				g.Lag, g.Delivered, g.Acked, g.Redeliveries, g.DeadLetters, g.LatencyP50ms, g.LatencyP99ms)
		}
		tw.Flush()
	}
	if len(st.HotDevices) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "DEVICE\tMSGS/S\tISOLATED")
		for _, d := range st.HotDevices {
			fmt.Fprintf(tw, "%s\t%.1f\t%v\n", d.Device, d.Rate, d.Hot)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nconnections %d (total %d, auth failures %d, slow-consumer closes %d)\n",
		st.Connections.Current, st.Connections.Total, st.Connections.AuthFailures, st.Connections.SlowConsumers+st.Connections.WriteTimeouts)
	for name, s := range st.Sources {
		fmt.Fprintf(w, "source %-20s %d msgs, %s, %d errors\n", name, s.Msgs, human(int64(s.Bytes)), s.Errors)
	}
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
