package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// benchResult is what `edgeq bench --json` prints.
type benchResult struct {
	Mode          string  `json:"mode"`
	Server        string  `json:"server"`
	WorkerServer  string  `json:"worker_server,omitempty"`
	Msgs          int     `json:"msgs"`
	Devices       int     `json:"devices"`
	Size          int     `json:"size"`
	Publishers    int     `json:"publishers"`
	Workers       int     `json:"workers"`
	Window        int     `json:"window"`
	Backlog       bool    `json:"backlog,omitempty"` // workers started after the last pub-ack
	PublishPerSec float64 `json:"publish_per_sec"`   // until the last pub-ack (durable, jspush) or publish flush (core)
	DeliverPerSec float64 `json:"deliver_per_sec"`   // until the last delivery; with backlog, from the workers' start
	P50ms         float64 `json:"p50_ms"`
	P90ms         float64 `json:"p90_ms"`
	P99ms         float64 `json:"p99_ms"`
	Duplicates    int64   `json:"duplicates"`
	Errors        int64   `json:"errors"`
}

// runBench is a NATS load generator: publishers publish to device subjects,
// workers in one queue group receive (and, in durable mode, ack) them, and
// the publish→delivery latency is measured from a timestamp in the payload.
// Durable mode talks to edgeq (pub-acks, stored, acked deliveries); core mode
// uses plain core-NATS subjects, so the same run works against nats-server;
// jspush mode runs the same workload against nats-server's JetStream (a
// file-store stream, PublishAsync with the same window, a push deliver group
// with explicit acks), so the peers are measured with the same client code.
// jetstream mode is the ordered workload of bench_jetstream.go. nowait mode
// is durable mode with publishes nobody waits for (no reply subject), as a
// serial line or a Modbus poller ingests.
func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	mode := fs.String("mode", "durable", "durable (edgeq: pub-acks, queue group with acks), core (plain NATS subjects, e.g. against nats-server), "+
		"jspush (nats-server -js: stream, PublishAsync, push deliver group with acks), nowait (edgeq: durable without pub-acks, as serial ingest) or jetstream (the ordered workload through the jetstream package: edgeq's pull consumer, and with --peer nats-server's pull consumer and its ordered partition workaround)")
	msgs := fs.Int("msgs", 100_000, "messages to publish")
	devices := fs.Int("devices", 1000, "distinct devices")
	size := fs.Int("size", 150, "payload bytes (at least 16)")
	pubs := fs.Int("publishers", 4, "publishing connections")
	workers := fs.Int("workers", 4, "worker connections in the queue group")
	queue := fs.String("queue", "bench", "queue group name")
	window := fs.Int("window", 1000, "unacknowledged publishes per publisher (durable, jspush and jetstream modes)")
	backlog := fs.Bool("backlog", false, "start the workers only after the last pub-ack: they drain a backlog (edgeq needs the queue group declared with deliver: all)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	rate := fs.Int("rate", 0, "publish at most this many msgs/s in total (0: as fast as possible)")
	workerServer := fs.String("worker-server", "", "NATS URL the workers connect to (default: --server), e.g. another node of a cluster")
	peer := fs.String("peer", "", "jetstream mode: NATS URL of a nats-server with JetStream (-js) to run the same workload against")
	partitions := fs.Int("partitions", 8, "jetstream mode: partition subjects of the peer's ordered workaround (one consumer each, MaxAckPending 1)")
	maxAckPending := fs.Int("max-ack-pending", 1024, "jetstream mode: MaxAckPending of the (unpartitioned) pull consumers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *mode {
	case "durable", "core", "jspush", "nowait":
	case "jetstream":
		if *pubs < 1 || *workers < 1 || *devices < 1 || *msgs < 1 || *partitions < 1 || *window < 1 {
			fmt.Fprintln(stderr, "edgeq bench: --msgs, --devices, --publishers, --workers, --window and --partitions must be at least 1")
			return 2
		}
		return runBenchJetStream(cf, *peer, jsOrderedSpec{total: *msgs, devices: *devices, size: max(*size, 16), pubs: *pubs, workers: *workers,
			window: *window, maxAckPending: *maxAckPending, partitions: *partitions}, *asJSON, stdout, stderr)
	default:
		fmt.Fprintln(stderr, "edgeq bench: --mode is durable, nowait, core, jspush or jetstream")
		return 2
	}
	*size = max(*size, 16)
	wf := cf
	if *workerServer != "" {
		wf.server = *workerServer
	}
	res, err := bench(cf, wf, benchSpec{mode: *mode, total: *msgs, devices: *devices, size: *size, pubs: *pubs,
		workers: *workers, queue: *queue, window: *window, rate: *rate, backlog: *backlog}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "edgeq bench: %v\n", err)
		return 1
	}
	if *asJSON {
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
		return 0
	}
	workersAt := ""
	if res.WorkerServer != "" {
		workersAt = " on " + res.WorkerServer
	}
	fmt.Fprintf(stdout, "%s bench against %s: %d msgs, %d devices, %d B payload, %d publishers, %d workers%s\n",
		res.Mode, res.Server, res.Msgs, res.Devices, res.Size, res.Publishers, res.Workers, workersAt)
	fmt.Fprintf(stdout, "  publish   %10.0f msgs/s\n  delivered %10.0f msgs/s\n  latency   p50 %.2f ms  p90 %.2f ms  p99 %.2f ms\n",
		res.PublishPerSec, res.DeliverPerSec, res.P50ms, res.P90ms, res.P99ms)
	if res.Duplicates > 0 || res.Errors > 0 {
		fmt.Fprintf(stdout, "  duplicates %d  errors %d\n", res.Duplicates, res.Errors)
	}
	return 0
}

// benchSpec is one bench run's workload.
type benchSpec struct {
	mode                                        string
	total, devices, size, pubs, workers, window int
	queue                                       string
	rate                                        int
	backlog                                     bool
}

// jsStream is the stream the jspush and jetstream modes create on
// nats-server (and delete first).
const jsStream = "EDGEQBENCH"

// bench publishes through cf and consumes through wf (the same node, or
// another node of a cluster).
func bench(cf, wf clientFlags, sp benchSpec, progress io.Writer) (benchResult, error) {
	total, mode := sp.total, sp.mode
	res := benchResult{Mode: mode, Server: cf.server, Msgs: total, Devices: sp.devices, Size: sp.size,
		Publishers: sp.pubs, Workers: sp.workers, Window: sp.window, Backlog: sp.backlog}
	if wf.server != cf.server {
		res.WorkerServer = wf.server
	}
	prefix := cf.prefix
	if mode != "durable" && mode != "nowait" {
		prefix = "bench"
	}
	latencies := make([]int64, total) // indexed by message number: bounded by --msgs
	var delivered, dupes, errs atomic.Int64
	seen := make([]atomic.Bool, total)
	allDelivered := make(chan struct{})
	var closeOnce sync.Once
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	if mode == "jspush" {
		nc, err := cf.connect("edgeq bench setup")
		if err != nil {
			return res, err
		}
		conns = append(conns, nc)
		if err := setupStream(nc, prefix, sp.queue, sp.workers*256); err != nil {
			return res, err
		}
	}
	onMsg := func(m *nats.Msg) {
		now := time.Now().UnixNano()
		if len(m.Data) >= 16 {
			id := binary.LittleEndian.Uint64(m.Data[8:])
			if id < uint64(total) {
				if seen[id].Swap(true) {
					dupes.Add(1)
				} else {
					latencies[id] = now - int64(binary.LittleEndian.Uint64(m.Data))
					if delivered.Add(1) == int64(total) {
						closeOnce.Do(func() { close(allDelivered) })
					}
				}
			}
		}
		if mode != "core" {
			if err := m.Ack(); err != nil {
				errs.Add(1)
			}
		}
	}
	startWorkers := func() error {
		for w := 0; w < sp.workers; w++ {
			nc, err := wf.connect(fmt.Sprintf("edgeq bench worker %d", w))
			if err != nil {
				return err
			}
			conns = append(conns, nc)
			var sub *nats.Subscription
			if mode == "jspush" {
				js, err := nc.JetStream()
				if err != nil {
					return err
				}
				sub, err = js.QueueSubscribe(prefix+".>", sp.queue, onMsg, nats.Bind(jsStream, sp.queue), nats.ManualAck())
				if err != nil {
					return fmt.Errorf("jetstream subscribe: %w", err)
				}
			} else if sub, err = nc.QueueSubscribe(prefix+".>", sp.queue, onMsg); err != nil {
				return err
			}
			_ = sub.SetPendingLimits(-1, -1)
			if err := nc.Flush(); err != nil {
				return err
			}
		}
		return nil
	}
	if !sp.backlog {
		if err := startWorkers(); err != nil {
			return res, err
		}
	}
	start := time.Now()
	var published atomic.Int64
	var pubWG sync.WaitGroup
	per := (total + sp.pubs - 1) / sp.pubs
	for p := 0; p < sp.pubs; p++ {
		nc, err := cf.connect(fmt.Sprintf("edgeq bench publisher %d", p))
		if err != nil {
			return res, err
		}
		conns = append(conns, nc)
		from, to := p*per, min((p+1)*per, total)
		if from >= to {
			continue
		}
		pubWG.Add(1)
		go func(nc *nats.Conn, from, to int) {
			defer pubWG.Done()
			perPub := 0
			if sp.rate > 0 {
				perPub = max(sp.rate/sp.pubs, 1)
			}
			if err := publishRange(nc, mode, prefix, from, to, sp.devices, sp.size, sp.window, perPub, &published, &errs); err != nil {
				fmt.Fprintf(progress, "publisher: %v\n", err)
			}
		}(nc, from, to)
	}
	stopProgress := showProgress(progress, total, &published, &delivered)
	pubWG.Wait()
	pubDone := time.Since(start)
	deliverStart := start
	if sp.backlog {
		deliverStart = time.Now()
		if err := startWorkers(); err != nil {
			stopProgress()
			return res, err
		}
	}
	select {
	case <-allDelivered:
	case <-time.After(2*time.Minute + pubDone):
		stopProgress()
		return res, fmt.Errorf("only %d of %d messages delivered", delivered.Load(), total)
	}
	deliverDone := time.Since(deliverStart)
	stopProgress()
	slices.Sort(latencies)
	q := func(f float64) float64 { return float64(latencies[int(f*float64(total-1))]) / 1e6 }
	res.PublishPerSec = float64(total) / pubDone.Seconds()
	res.DeliverPerSec = float64(total) / deliverDone.Seconds()
	res.P50ms, res.P90ms, res.P99ms = q(0.5), q(0.9), q(0.99)
	res.Duplicates, res.Errors = dupes.Load(), errs.Load()
	return res, nil
}

// setupStream (re)creates the bench stream (file store) and a durable push
// consumer with a deliver group: explicit acks, everything from the start,
// maxAckPending unacked messages (edgeq's credit: 256 per member).
func setupStream(nc *nats.Conn, prefix, queue string, maxAckPending int) error {
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	_ = js.DeleteStream(jsStream)
	if _, err := js.AddStream(&nats.StreamConfig{Name: jsStream, Subjects: []string{prefix + ".>"}, Storage: nats.FileStorage}); err != nil {
		return fmt.Errorf("jetstream: add stream: %w", err)
	}
	_, err = js.AddConsumer(jsStream, &nats.ConsumerConfig{
		Durable: queue, DeliverSubject: nats.NewInbox(), DeliverGroup: queue,
		AckPolicy: nats.AckExplicitPolicy, DeliverPolicy: nats.DeliverAllPolicy,
		MaxAckPending: maxAckPending, AckWait: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("jetstream: add consumer: %w", err)
	}
	return nil
}

// publishRange publishes messages from..to-1. Payload: 8 bytes publish time,
// 8 bytes message number, then padding. In durable mode each publish carries a
// reply subject and at most window wait for their pub-ack.
func publishRange(nc *nats.Conn, mode, prefix string, from, to, devices, size, window, rate int, published, errs *atomic.Int64) error {
	if mode == "jspush" {
		return publishJetStream(nc, prefix, from, to, devices, size, window, rate, published, errs)
	}
	var acks chan struct{}
	var inbox string
	if mode == "durable" {
		acks = make(chan struct{}, window)
		inbox = nats.NewInbox()
		if _, err := nc.Subscribe(inbox, func(m *nats.Msg) {
			if strings.Contains(string(m.Data), `"error"`) {
				errs.Add(1)
			}
			published.Add(1)
			<-acks
		}); err != nil {
			return err
		}
	}
	payload, subjects := benchPayload(prefix, size, devices)
	pace := pacer(rate)
	for i := from; i < to; i++ {
		pace(i - from)
		binary.LittleEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		binary.LittleEndian.PutUint64(payload[8:], uint64(i))
		subject := subjects[i%devices]
		if mode == "durable" {
			acks <- struct{}{}
			if err := nc.PublishRequest(subject, inbox, payload); err != nil {
				return err
			}
		} else {
			if err := nc.Publish(subject, payload); err != nil {
				return err
			}
			published.Add(1)
		}
	}
	if mode == "durable" {
		for len(acks) > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return nc.Flush()
}

// benchPayload returns a payload buffer (padding after the 16 bytes of time
// and number) and the device subjects.
func benchPayload(prefix string, size, devices int) ([]byte, []string) {
	payload := make([]byte, size)
	for i := range payload[16:] {
		payload[16+i] = 'x'
	}
	subjects := make([]string, devices)
	for d := range subjects {
		subjects[d] = fmt.Sprintf("%s.bench-%05d", prefix, d)
	}
	return payload, subjects
}

// pacer returns a func that sleeps until message k is due (k/rate after the
// first call); with rate 0 it never sleeps.
func pacer(rate int) func(k int) {
	start := time.Now()
	return func(k int) {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(k) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
	}
}

// publishJetStream publishes messages from..to-1 to a JetStream stream with
// PublishAsync, at most window waiting for their pub-ack.
func publishJetStream(nc *nats.Conn, prefix string, from, to, devices, size, window, rate int, published, errs *atomic.Int64) error {
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(window), nats.PublishAsyncErrHandler(func(nats.JetStream, *nats.Msg, error) {
		errs.Add(1)
	}))
	if err != nil {
		return err
	}
	pad, subjects := benchPayload(prefix, size, devices)
	pace := pacer(rate)
	for i := from; i < to; i++ {
		pace(i - from)
		payload := slices.Clone(pad) // PublishAsync keeps the message until its ack
		binary.LittleEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		binary.LittleEndian.PutUint64(payload[8:], uint64(i))
		for {
			_, err := js.PublishAsync(subjects[i%devices], payload)
			if errors.Is(err, nats.ErrTooManyStalledMsgs) {
				continue // the window stayed full for nats.go's stall wait (200ms): try again
			}
			if err != nil {
				return err
			}
			break
		}
		published.Add(1)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("jetstream: pub-acks missing after a minute")
	}
	return nil
}

// showProgress draws a progress bar on a terminal; elsewhere it stays quiet.
func showProgress(w io.Writer, total int, published, delivered *atomic.Int64) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	f := w.(*os.File)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p, d := published.Load(), delivered.Load()
			const width = 30
			bar := strings.Repeat("#", int(d*width/int64(total))) + strings.Repeat(".", width-int(d*width/int64(total)))
			fmt.Fprintf(f, "\r[%s] published %d/%d delivered %d", bar, p, total, d)
			select {
			case <-done:
				fmt.Fprint(f, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}
