package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"edgeq/gateway/apiv1"
)

// ANSI: cursor home, clear the screen. Written before each refresh of
// --watch on a terminal only.
const clearHome = "\x1b[H\x1b[2J"

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("http", envOr("EDGEQ_HTTP", "http://127.0.0.1:8222"), "HTTP address of the node (also $EDGEQ_HTTP)")
	token := fs.String("token", os.Getenv("EDGEQ_HTTP_TOKEN"), "bearer token (also $EDGEQ_HTTP_TOKEN)")
	tlsCA := fs.String("tlsca", os.Getenv("EDGEQ_TLSCA"), "CA file an https:// node's certificate is checked against (also $EDGEQ_TLSCA)")
	raw := fs.Bool("json", false, "print the raw JSON")
	watch := fs.Bool("watch", false, "refresh in place until interrupted; rates (msgs/s, CPU) need two refreshes")
	interval := fs.Duration("interval", 2*time.Second, "time between refreshes with --watch")
	count := fs.Int("count", 0, "with --watch: stop after this many refreshes (0: until interrupted)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *interval < 100*time.Millisecond || *count < 0 {
		fmt.Fprintln(stderr, "edgeq status: --interval must be at least 100ms and --count not negative")
		return 2
	}
	c := statusClient{url: *url, token: *token, client: &http.Client{Timeout: 5 * time.Second}}
	if *tlsCA != "" {
		pem, err := os.ReadFile(*tlsCA)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "edgeq status: --tlsca %s: no PEM certificate (%v)\n", *tlsCA, err)
			return 2
		}
		c.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	if !*watch {
		st, body, err := c.fetch()
		if err != nil {
			fmt.Fprintf(stderr, "edgeq status: %v\n", err)
			return 1
		}
		if *raw {
			stdout.Write(body)
			return 0
		}
		printStatus(stdout, st, nil)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	watchStatus(ctx, c, stdout, isTerminal(stdout), *raw, *interval, *count)
	return 0
}

// watchStatus refreshes every interval until ctx ends or count refreshes
// are done (0: no limit). On a terminal each refresh replaces the last
// (cursor home, clear); otherwise refreshes follow each other, separated by
// a blank line, with no escape codes. A node that does not answer is shown
// as an error line, and the next refresh tries again.
func watchStatus(ctx context.Context, c statusClient, w io.Writer, tty, raw bool, interval time.Duration, count int) {
	var prev *apiv1.Status
	for i := 0; count == 0 || i < count; i++ {
		var frame bytes.Buffer
		st, body, err := c.fetch()
		switch {
		case err != nil:
			fmt.Fprintf(&frame, "%s  edgeq status: %v (trying again every %s)\n", time.Now().Format(time.TimeOnly), err, interval)
		case raw:
			frame.Write(bytes.TrimSpace(body))
			frame.WriteByte('\n')
		default:
			printStatus(&frame, st, prev)
			prev = st
		}
		switch {
		case tty:
			io.WriteString(w, clearHome)
		case i > 0 && !raw:
			io.WriteString(w, "\n")
		}
		w.Write(frame.Bytes())
		if count > 0 && i == count-1 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// isTerminal reports whether w is a terminal, where --watch may move the
// cursor and bench draws its progress bar. A character device is not enough:
// /dev/null is one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type statusClient struct {
	url, token string
	client     *http.Client
}

// fetch gets /v1/status: the decoded document and the body as sent.
func (c statusClient) fetch() (*apiv1.Status, []byte, error) {
	req, err := http.NewRequest("GET", c.url+"/v1/status", nil)
	if err != nil {
		return nil, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%v (is the node running? see --http)", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	var st apiv1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, nil, err
	}
	return &st, body, nil
}

// rater turns two counter readings into a per-second rate over the node's
// clock (Status.Time). It has no rate for a first reading, a counter that
// went backwards (the node restarted) or no time between readings.
type rater struct{ dt float64 }

func newRater(prev, cur *apiv1.Status) rater {
	if prev == nil || prev.Node != cur.Node {
		return rater{}
	}
	return rater{dt: cur.Time.Sub(prev.Time).Seconds()}
}

func (r rater) rate(prev, cur uint64, ok bool) string {
	if !ok || r.dt <= 0 || cur < prev {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(cur-prev)/r.dt)
}

// printStatus writes the status for people; prev (nil at first) gives the
// rates.
func printStatus(w io.Writer, st, prev *apiv1.Status) {
	r := newRater(prev, st)
	ready := "ready"
	if !st.Ready {
		ready = "NOT READY"
	}
	fmt.Fprintf(w, "node %s  %s  up %s  version %s  at %s\n", st.Node, ready, time.Duration(st.UptimeSeconds)*time.Second, st.Version, st.Time.Local().Format(time.TimeOnly))
	fmt.Fprintf(w, "nats %s  http %s  data %s  durability %s\n", st.NATS, st.HTTP, st.DataDir, st.Durability)
	if c := st.Cluster; c != nil {
		down, silent := 0, 0
		for _, a := range c.Unreachable {
			if a.Node == "" {
				silent++
			} else {
				down++
			}
		}
		fmt.Fprintf(w, "cluster %s  peer listener %s  peers %d up, %d down", c.Name, c.Listen, len(c.Peers), down)
		if silent > 0 {
			fmt.Fprintf(w, ", unanswered addresses %d", silent)
		}
		fmt.Fprintln(w)
	}
	full := ""
	if st.Log.FullPolicy != "" {
		full = ", full_policy " + st.Log.FullPolicy
	}
	if st.Log.RetentionDropped > 0 {
		full += fmt.Sprintf(", %d unconsumed records dropped", st.Log.RetentionDropped)
	}
	if st.Log.Full {
		full += "  FULL (rejecting)"
	}
	if st.Log.DiskLow {
		full += "  DISK LOW (below the free-space watermark)"
	}
	fmt.Fprintf(w, "log %s of %s, %d devices%s\n", human(st.Log.Bytes), human(st.Log.MaxBytes), st.Log.Devices, full)
	var prevDev *apiv1.DeviceHealth
	if prev != nil && r.dt > 0 {
		prevDev = &prev.Device
	}
	printDevice(w, st.Device, prevDev)
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	prevParts := map[int]apiv1.PartitionStatus{}
	if prev != nil {
		for _, p := range prev.Partitions {
			prevParts[p.Partition] = p
		}
	}
	fmt.Fprintln(tw, "PARTITION\tFIRST\tLAST\tDURABLE\tSIZE\tAPPENDS\tAPPENDS/S\tFSYNCS\tFSYNC P99")
	for _, p := range st.Partitions {
		name := fmt.Sprint(p.Partition)
		if p.Hot {
			name += " (hot)"
		}
		pp, ok := prevParts[p.Partition]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%s\n", name, p.First, p.Last, p.Durable, human(p.Bytes), p.Appends,
			r.rate(pp.Appends, p.Appends, ok), p.Fsyncs, millis(p.FsyncP99ms))
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(st.Groups) == 0 {
		fmt.Fprintln(w, "no queue groups")
	} else {
		prevGroups := map[[2]string]apiv1.GroupStatus{}
		if prev != nil {
			for _, g := range prev.Groups {
				prevGroups[[2]string{g.Filter, g.Queue}] = g
			}
		}
		if st.Cluster != nil {
			printClusterGroups(tw, st, prevGroups, r)
		} else {
			fmt.Fprintln(tw, "GROUP\tQUEUE\tMEMBERS\tIN FLIGHT\tPENDING\tLAG\tDELIVERED/S\tACKED/S\tDELIVERED\tACKED\tREDELIVERED\tDEAD\tP50\tP99")
			for _, g := range st.Groups {
				pg, ok := prevGroups[[2]string{g.Filter, g.Queue}]
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", g.Filter, g.Queue, g.Members, g.InFlight, g.Pending,
					g.Lag, r.rate(pg.Delivered, g.Delivered, ok), r.rate(pg.Acked, g.Acked, ok), g.Delivered, g.Acked,
					g.Redeliveries, g.DeadLetters, millis(g.LatencyP50ms), millis(g.LatencyP99ms))
			}
		}
		tw.Flush()
	}
	if st.Cluster != nil {
		printCluster(w, st, prev, r)
	}
	if len(st.HotDevices) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "DEVICE\tMSGS/S\tISOLATED")
		for _, d := range st.HotDevices {
			fmt.Fprintf(tw, "%s\t%.1f\t%v\n", d.Device, d.Rate, d.Hot)
		}
		tw.Flush()
	}
	printBridges(w, st, prev, r)
	fmt.Fprintf(w, "\nconnections %d (total %d, auth failures %d, slow-consumer closes %d, stale %d)\n",
		st.Connections.Current, st.Connections.Total, st.Connections.AuthFailures, st.Connections.SlowConsumers+st.Connections.WriteTimeouts, st.Connections.Stale)
	if q := st.NSQ; q != nil {
		fmt.Fprintf(w, "nsq %s: connections %d, rdy %d, in flight %d, fin %d, req %d, touch %d, unknown ids %d, rdy exceeded %d\n",
			q.Listen, q.Connections, q.RDY, q.InFlight, q.Fin, q.Req, q.Touch, q.UnknownIDs, q.RdyExceeded)
	}
	names := make([]string, 0, len(st.Sources))
	for name := range st.Sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := st.Sources[name]
		var ps apiv1.Source
		ok := false
		if prev != nil {
			ps, ok = prev.Sources[name]
		}
		fmt.Fprintf(w, "source %-20s %d msgs (%s/s), %s, %d errors\n", name, s.Msgs, r.rate(ps.Msgs, s.Msgs, ok), human(int64(s.Bytes)), s.Errors)
	}
	var rejected []string
	for _, reason := range slices.Sorted(maps.Keys(st.Log.Rejected)) {
		if n := st.Log.Rejected[reason]; n > 0 {
			rejected = append(rejected, fmt.Sprintf("%s %d", reason, n))
		}
	}
	if len(rejected) > 0 {
		fmt.Fprintf(w, "rejected by the log: %s\n", strings.Join(rejected, ", "))
	}
}

// printDevice writes the device-health line: CPU use needs the previous
// refresh (prev), the rest is read as is. A value whose collector failed is
// shown as "?".
func printDevice(w io.Writer, d apiv1.DeviceHealth, prev *apiv1.DeviceHealth) {
	var parts []string
	cpu := "cpu -"
	if prev != nil {
		if p, ok := apiv1.CPUPercent(*prev, d); ok {
			cpu = fmt.Sprintf("cpu %.0f%%", p)
		}
	}
	if d.CPUs != nil {
		cpu += fmt.Sprintf(" of %d", *d.CPUs)
	}
	parts = append(parts, cpu)
	if d.Load1 != nil && d.Load5 != nil && d.Load15 != nil {
		parts = append(parts, fmt.Sprintf("load %.2f %.2f %.2f", *d.Load1, *d.Load5, *d.Load15))
	} else {
		parts = append(parts, "load ?")
	}
	if t, ok := d.CPUTemperature(); ok {
		parts = append(parts, fmt.Sprintf("temp %.1f°C (%s)", t.Celsius, t.Type))
	}
	parts = append(parts, "mem "+freeOf(d.MemoryAvailableBytes, d.MemoryTotalBytes))
	parts = append(parts, "disk "+freeOf(d.DiskAvailBytes, d.DiskSizeBytes))
	if d.ProcessRSSBytes != nil {
		parts = append(parts, "rss "+human(int64(*d.ProcessRSSBytes)))
	}
	if d.OpenFDs != nil && d.MaxFDs != nil {
		parts = append(parts, fmt.Sprintf("fds %d/%d", *d.OpenFDs, *d.MaxFDs))
	}
	fmt.Fprintf(w, "device %s\n", strings.Join(parts, "  "))
	if len(d.Failed) > 0 {
		fmt.Fprintf(w, "device metrics failing: %s (see the node's log)\n", strings.Join(d.Failed, ", "))
	}
}

func freeOf(free, total *uint64) string {
	if free == nil || total == nil {
		return "?"
	}
	return fmt.Sprintf("%s free of %s", human(int64(*free)), human(int64(*total)))
}

// printBridges writes a table per bridge kind with what each stored, its
// rate and its last error.
func printBridges(w io.Writer, st, prev *apiv1.Status, r rater) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.MQTT) > 0 {
		prevStored := map[string]uint64{}
		if prev != nil {
			for _, b := range prev.MQTT {
				prevStored[b.Name] = b.Counters.Stored
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "MQTT\tBROKER\tCONNECTED\tRECEIVED\tSTORED\tSTORED/S\tDROPPED\tUNMAPPABLE\tERRORS\tLAST ERROR")
		for _, b := range st.MQTT {
			c := b.Counters
			ps, ok := prevStored[b.Name]
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\t%d\t%d\t%d\t%s\n", b.Name, b.Broker, b.Connected, c.Received, c.Stored,
				r.rate(ps, c.Stored, ok), sum(c.Dropped), sum(c.Unmappable), c.StorageErrors, lastError(b.LastError, b.LastErrorTime))
		}
		tw.Flush()
	}
	if len(st.Serial) > 0 {
		prevStored := map[string]uint64{}
		if prev != nil {
			for _, p := range prev.Serial {
				prevStored[p.Name] = p.Stored
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "SERIAL\tPATH\tOPEN\tFRAMES\tSTORED\tSTORED/S\tDROPPED\tERRORS\tLAST ERROR")
		for _, p := range st.Serial {
			ps, ok := prevStored[p.Name]
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\t%d\t%d\t%s\n", p.Name, p.Path, p.Open, p.FramesIn, p.Stored,
				r.rate(ps, p.Stored, ok), sum(p.Dropped), p.StorageErrors, lastError(p.LastError, p.LastErrorTime))
		}
		tw.Flush()
	}
	if len(st.Uplinks) > 0 {
		prevAcked := map[string]uint64{}
		if prev != nil {
			for _, u := range prev.Uplinks {
				prevAcked[u.Name] = u.Acked
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "UPLINK	TYPE	STATE	LAG	LAG BYTES	HELD/WINDOW	OLDEST UNSENT	ACKED	ACKED/S	RETRIED	DEAD	LAST ERROR")
		for _, u := range st.Uplinks {
			pa, ok := prevAcked[u.Name]
			// Only the group's leader knows the lag; elsewhere a 0 would lie.
			lag, lagBytes := "-", "-"
			if u.Leading {
				lag, lagBytes = fmt.Sprint(u.LagRecords), human(int64(min(u.LagBytes, 1<<62)))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%.1fs\t%d\t%s\t%d\t%d\t%s\n", u.Name, u.Type, u.State, lag, lagBytes, u.Held, u.Window,
				u.OldestUnsentSeconds, u.Acked, r.rate(pa, u.Acked, ok), u.Retried, u.DeadLetters, u.LastError)
		}
		tw.Flush()
	}
}

func lastError(msg string, when time.Time) string {
	if msg == "" {
		return "-"
	}
	if len(msg) > 60 {
		msg = msg[:57] + "..."
	}
	return when.Local().Format(time.TimeOnly) + " " + msg
}

func sum[K comparable](m map[K]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func millis(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fms", ms)
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

// printClusterGroups writes the GROUP table of a cluster node: who delivers
// each group, and the delivery figures only where this node does (another
// node's leader has them; "-" here, not 0).
func printClusterGroups(tw io.Writer, st *apiv1.Status, prev map[[2]string]apiv1.GroupStatus, r rater) {
	fmt.Fprintln(tw, "GROUP\tQUEUE\tLED BY\tMEMBERS\tIN FLIGHT\tPENDING\tLAG\tDELIVERED/S\tACKED/S\tDELIVERED\tACKED\tREDELIVERED\tDEAD\tP50\tP99")
	for _, g := range st.Groups {
		if !g.Leading {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", g.Filter, g.Queue, leaderOf(st.Cluster, g), g.Members)
			continue
		}
		pg, ok := prev[[2]string{g.Filter, g.Queue}]
		ok = ok && pg.Leading // counted by this node's leadership since it began
		fmt.Fprintf(tw, "%s\t%s\tthis node\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", g.Filter, g.Queue, g.Members, g.InFlight, g.Pending,
			g.Lag, r.rate(pg.Delivered, g.Delivered, ok), r.rate(pg.Acked, g.Acked, ok), g.Delivered, g.Acked,
			g.Redeliveries, g.DeadLetters, millis(g.LatencyP50ms), millis(g.LatencyP99ms))
	}
}

// leaderOf names the leader of a group this node does not deliver.
func leaderOf(c *apiv1.ClusterStatus, g apiv1.GroupStatus) string {
	l, ok := c.Leaders[g.Filter+" "+g.Queue]
	switch {
	case !ok || l.Leader == "":
		return "(electing)"
	case l.Self:
		return "this node (stepping down)"
	}
	return l.Leader
}

// printCluster writes the cluster section: peers (up, and the addresses to
// dial that have no connection), the leader of each group with its members
// by node, and the cluster's counters.
func printCluster(w io.Writer, st, prev *apiv1.Status, r rater) {
	c := st.Cluster
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w)
	if len(c.Peers)+len(c.Unreachable) == 0 {
		fmt.Fprintln(w, "no peers")
	} else {
		prevPeers := map[string]apiv1.PeerStatus{}
		if prev != nil && prev.Cluster != nil {
			for _, p := range prev.Cluster.Peers {
				prevPeers[p.Node] = p
			}
		}
		fmt.Fprintln(tw, "PEER\tADDRESS\tPRIORITY\tPARTITIONS\tSTATE\tLAST SEEN\tQUEUED\tFRAMES IN/S\tFRAMES OUT/S\tBYTES IN\tBYTES OUT")
		for _, p := range c.Peers {
			pp, ok := prevPeers[p.Node]
			ok = ok && pp.Since.Equal(p.Since) // the same connection: its counters go on
			addr := p.Addr
			if !p.Dialed {
				addr += " (in)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\tup %s\t%s ago\t%s\t%s\t%s\t%s\t%s\n", p.Node, addr, p.Priority, p.Partitions,
				age(st.Time.Sub(p.Since), time.Second), age(st.Time.Sub(p.LastSeen), 100*time.Millisecond), human(int64(p.QueuedBytes)),
				r.rate(pp.FramesIn, p.FramesIn, ok), r.rate(pp.FramesOut, p.FramesOut, ok), human(int64(p.BytesIn)), human(int64(p.BytesOut)))
		}
		for _, a := range c.Unreachable {
			node, state := a.Node, "down"
			if node == "" {
				node, state = "?", "no answer"
			}
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t%s\t-\t-\t-\t-\t-\t-\n", node, a.Addr, state)
		}
		tw.Flush()
	}
	if len(st.Groups) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "LEADER\tEPOCH\tGROUP\tQUEUE\tMEMBERS BY NODE\tFORWARDS")
		for _, g := range st.Groups {
			leader, epoch := "(electing)", "-"
			if l, ok := c.Leaders[g.Filter+" "+g.Queue]; ok {
				leader, epoch = l.Leader, l.Epoch
				if l.Self {
					leader += " (this node)"
				}
			}
			fwd := "-"
			if g.Leading {
				fwd = fmt.Sprint(g.Forwards)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", leader, epoch, g.Filter, g.Queue, byNode(g.MembersByNode), fwd)
		}
		tw.Flush()
	}
	pe, el, d := c.PeerEvents, c.Election, c.DataPath
	fmt.Fprintf(w, "\npeers came up %d times, went down %d; refused peers %d, send-queue overflows %d\n",
		pe.Ups, pe.Downs, c.Refused, pe.SendQueueOverflows)
	fmt.Fprintf(w, "peer frames refused (tampered) %d; handshakes failed %d, refused as busy %d\n",
		pe.RefusedFrames, pe.FailedHandshakes, pe.BusyHandshakes)
	fmt.Fprintf(w, "elections %d, leaderships won %d (handed over %d, deposed %d), take-overs %d; stale coordinators %d, fenced requests %d\n",
		el.Elections, el.Leaderships, el.HandOvers, el.Deposed, el.TakeOvers, el.StaleCoordinators, d.FencedRequests)
	fmt.Fprintf(w, "forwards received %d (refused %d), acks relayed %d, remote commits %d (failed %d)\n",
		d.ForwardsIn, d.ForwardsRefused, d.AcksRelayed, d.RemoteCommits, d.RemoteCommitFailures)
}

// byNode writes members by node as "gw-a:2 gw-b:1".
func byNode(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, n := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", n, m[n]))
	}
	return strings.Join(parts, " ")
}

// age rounds a duration for people: to the second for uptimes, to a tenth
// of a second for heartbeats; never negative.
func age(d, unit time.Duration) string {
	d = max(d, 0).Round(unit)
	if unit < time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.String()
}
