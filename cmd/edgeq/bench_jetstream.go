package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The ordered workload through the jetstream package (`edgeq bench --mode
// jetstream`): a backlog of msgs over devices, published with PublishAsync,
// then drained by workers in Consume() with explicit acks. The same client
// code runs against edgeq (one durable pull consumer: per-device order is
// the server's) and, with --peer, against nats-server JetStream: its
// unordered pull consumer, and the ordered workaround (the publisher puts
// each device in one of N partition subjects, one consumer per partition
// with MaxAckPending 1, partitions spread over the workers; nats-server
// 2.9 has no subject transforms, so the publisher partitions).

// jsOrderedSpec is the workload.
type jsOrderedSpec struct {
	total, devices, size, pubs, workers, window int
	maxAckPending, partitions                   int
}

// jsScenario is one server and one way of consuming.
type jsScenario struct {
	Name       string `json:"name"`
	Server     string `json:"server"`
	peer       bool   // nats-server: the bench creates (and deletes) its stream
	prefix     string // subjects are <prefix>[.p<k>].bench-<device>
	partitions int    // 0: one consumer on <prefix>.>; N: N consumers with MaxAckPending 1
}

// jsOrderedResult is one scenario's figures.
type jsOrderedResult struct {
	jsScenario
	Msgs          int     `json:"msgs"`
	PublishPerSec float64 `json:"publish_per_sec"`
	DeliverPerSec float64 `json:"deliver_per_sec"` // first deliveries of the backlog, from the workers' start
	OutOfOrder    int64   `json:"out_of_order"`    // first deliveries older than one already delivered of the device
	Overlaps      int64   `json:"overlaps"`        // deliveries while another of the device was unacknowledged
	Redeliveries  int64   `json:"redeliveries"`
	Errors        int64   `json:"errors"`
	ServerCPU     float64 `json:"server_cpu_s"` // user+system seconds while draining; -1: unknown
}

// jsOrderedReport is what --json prints.
type jsOrderedReport struct {
	Msgs       int                `json:"msgs"`
	Devices    int                `json:"devices"`
	Size       int                `json:"size"`
	Publishers int                `json:"publishers"`
	Workers    int                `json:"workers"`
	Results    []jsOrderedResult  `json:"results"`
	Ratios     map[string]float64 `json:"ratios"` // deliveries per second, edgeq/pull and edgeq/partitions`
}

func runBenchJetStream(cf clientFlags, peer string, sp jsOrderedSpec, asJSON bool, stdout, stderr io.Writer) int {
	scenarios := []jsScenario{{Name: "edgeq, one durable pull consumer", Server: cf.server, prefix: cf.prefix}}
	if peer != "" {
		scenarios = append(scenarios,
			jsScenario{Name: "nats-server JetStream, pull consumer (unordered)", Server: peer, peer: true, prefix: "bench"},
			jsScenario{Name: fmt.Sprintf("nats-server JetStream, %d partitions, MaxAckPending 1", sp.partitions), Server: peer, peer: true, prefix: "bench", partitions: sp.partitions})
	}
	rep := jsOrderedReport{Msgs: sp.total, Devices: sp.devices, Size: sp.size, Publishers: sp.pubs, Workers: sp.workers, Ratios: map[string]float64{}}
	for _, sc := range scenarios {
		fmt.Fprintf(stderr, "bench: %s at %s\n", sc.Name, sc.Server)
		res, err := benchJetStreamOrdered(cf, sc, sp)
		if err != nil {
			fmt.Fprintf(stderr, "edgeq bench: %s: %v\n", sc.Name, err)
			return 1
		}
		rep.Results = append(rep.Results, res)
	}
	if len(rep.Results) == 3 {
		e := rep.Results[0].DeliverPerSec
		rep.Ratios["edgeq/pull"] = e / rep.Results[1].DeliverPerSec
		rep.Ratios["edgeq/partitions"] = e / rep.Results[2].DeliverPerSec
	}
	if asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
		return 0
	}
	fmt.Fprintf(stdout, "ordered workload: %d msgs x %d B, %d devices, %d publishers (PublishAsync, window %d), then %d workers in Consume() with explicit acks\n",
		sp.total, sp.size, sp.devices, sp.pubs, sp.window, sp.workers)
	fmt.Fprintf(stdout, "%-56s %9s %9s %12s %9s %8s %12s\n", "", "pub/s", "deliv/s", "out-of-order", "overlaps", "redeliv", "srv CPU us/msg")
	for _, r := range rep.Results {
		cpu := "?"
		if r.ServerCPU >= 0 {
			cpu = fmt.Sprintf("%.1f", r.ServerCPU*1e6/float64(r.Msgs))
		}
		fmt.Fprintf(stdout, "%-56s %9.0f %9.0f %12d %9d %8d %12s\n", r.Name, r.PublishPerSec, r.DeliverPerSec, r.OutOfOrder, r.Overlaps, r.Redeliveries, cpu)
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintf(stdout, "delivery ratio edgeq / unordered pull %.2fx, edgeq / ordered partitions %.2fx\n", rep.Ratios["edgeq/pull"], rep.Ratios["edgeq/partitions"])
	}
	bad := false
	for _, r := range rep.Results {
		if r.Errors > 0 {
			fmt.Fprintf(stdout, "%s: %d errors\n", r.Name, r.Errors)
			bad = true
		}
	}
	if bad {
		return 1
	}
	return 0
}

// deviceSubject is device d's subject in sc: partitioned by a hash of the
// device name when sc has partitions.
func (sc jsScenario) deviceSubject(d int) string {
	dev := fmt.Sprintf("bench-%05d", d)
	if sc.partitions > 0 {
		h := fnv.New32a()
		h.Write([]byte(dev))
		return fmt.Sprintf("%s.p%d.%s", sc.prefix, h.Sum32()%uint32(sc.partitions), dev)
	}
	return sc.prefix + "." + dev
}

// orderTracker checks the deliveries of one run. Message i is device
// i % devices, whose messages are published in the order of i. Bounded by
// the workload: one entry per device and two flags per message.
type orderTracker struct {
	mu                                          sync.Mutex
	devices                                     int
	last                                        []int64 // per device: highest message number first-delivered, -1: none
	inflight                                    []int32 // per device: deliveries in a handler, not acked yet
	seen, acked                                 []bool  // per message
	distinct                                    int
	outOfOrder, overlaps, redeliveries, foreign int64
	done                                        chan struct{}
}

func newOrderTracker(total, devices int) *orderTracker {
	t := &orderTracker{devices: devices, last: make([]int64, devices), inflight: make([]int32, devices),
		seen: make([]bool, total), acked: make([]bool, total), done: make(chan struct{})}
	for i := range t.last {
		t.last[i] = -1
	}
	return t
}

// begin records a handler's start on message i (first: the server's first
// delivery of it). An overlap is a delivery that reached a handler before
// the device's previous message was acked, or while another handler held
// one of the device: the server had two of the device out at once. (A
// delivery that waited in a worker's buffer until the previous one was
// acked is not seen, so this counts at most as many as happened.)
func (t *orderTracker) begin(i int64, first bool) {
	d := int(i % int64(t.devices))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight[d]++
	if t.inflight[d] > 1 || i >= int64(t.devices) && !t.acked[i-int64(t.devices)] {
		t.overlaps++
	}
	if !first || t.seen[i] {
		t.redeliveries++
	}
	if first {
		if i < t.last[d] {
			t.outOfOrder++
		} else {
			t.last[d] = i
		}
	}
	if !t.seen[i] {
		t.seen[i] = true
		if t.distinct++; t.distinct == len(t.seen) {
			close(t.done)
		}
	}
}

// end: message i is done; its ack is about to be sent.
func (t *orderTracker) end(i int64) {
	t.mu.Lock()
	t.inflight[i%int64(t.devices)]--
	t.acked[i] = true
	t.mu.Unlock()
}

func benchJetStreamOrdered(cf clientFlags, sc jsScenario, sp jsOrderedSpec) (jsOrderedResult, error) {
	res := jsOrderedResult{jsScenario: sc, Msgs: sp.total, ServerCPU: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cf.server = sc.Server
	var conns []*nats.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	var errs atomic.Int64
	connect := func(name string) (jetstream.JetStream, error) {
		nc, err := cf.connect(name)
		if err != nil {
			return nil, err
		}
		conns = append(conns, nc)
		return jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(sp.window),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { errs.Add(1) }))
	}
	js, err := connect("edgeq bench setup")
	if err != nil {
		return res, err
	}
	stream := jsStream
	if sc.peer {
		_ = js.DeleteStream(ctx, jsStream)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: jsStream, Subjects: []string{sc.prefix + ".>"}, Storage: jetstream.FileStorage}); err != nil {
			return res, fmt.Errorf("create stream: %w", err)
		}
		defer func() { _ = js.DeleteStream(context.Background(), jsStream) }()
	} else if stream, err = js.StreamNameBySubject(ctx, sc.deviceSubject(0)); err != nil {
		return res, fmt.Errorf("the stream of %s: %w", sc.deviceSubject(0), err)
	}
	// Consumers first, delivering only what is published after them: the
	// same code suits a node whose log already holds other messages.
	nonce := rand.Uint64()
	var consumers []string
	filters := []string{sc.prefix + ".>"}
	if sc.partitions > 0 {
		filters = filters[:0]
		for k := range sc.partitions {
			filters = append(filters, fmt.Sprintf("%s.p%d.>", sc.prefix, k))
		}
	}
	for k, f := range filters {
		name := fmt.Sprintf("bench-%x", nonce)
		mp := sp.maxAckPending
		if sc.partitions > 0 {
			name, mp = fmt.Sprintf("%s-p%d", name, k), 1
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, FilterSubject: f,
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy, MaxAckPending: mp, AckWait: 30 * time.Second}); err != nil {
			return res, fmt.Errorf("create consumer %s: %w", name, err)
		}
		consumers = append(consumers, name)
		defer func() { _ = js.DeleteConsumer(context.Background(), stream, name) }()
	}

	// Publish the backlog: device d by publisher d % pubs, so each device's
	// messages are published in order on one connection.
	pubStart := time.Now()
	var wg sync.WaitGroup
	pubErr := make(chan error, sp.pubs)
	for p := range sp.pubs {
		pjs, err := connect(fmt.Sprintf("edgeq bench publisher %d", p))
		if err != nil {
			return res, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := publishOrdered(ctx, pjs, sc, sp, p, nonce); err != nil {
				pubErr <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-pubErr:
		return res, err
	default:
	}
	res.PublishPerSec = float64(sp.total) / time.Since(pubStart).Seconds()

	// Drain it.
	pid := listenerPID(sc.Server)
	cpu0, cpuOK := procCPU(pid)
	tr := newOrderTracker(sp.total, sp.devices)
	handler := func(m jetstream.Msg) {
		data := m.Data()
		if len(data) < 16 || binary.LittleEndian.Uint64(data) != nonce || binary.LittleEndian.Uint64(data[8:]) >= uint64(sp.total) {
			tr.mu.Lock()
			tr.foreign++
			tr.mu.Unlock()
			_ = m.Ack()
			return
		}
		md, err := m.Metadata()
		if err != nil {
			errs.Add(1)
		}
		i := int64(binary.LittleEndian.Uint64(data[8:]))
		tr.begin(i, err == nil && md.NumDelivered == 1)
		// Recorded before the ack leaves, so a server that dispatches the
		// device's next message on receiving it can never look overlapped.
		tr.end(i)
		if err := m.Ack(); err != nil {
			errs.Add(1)
		}
	}
	drainStart := time.Now()
	var stops []jetstream.ConsumeContext
	defer func() {
		for _, s := range stops {
			s.Stop()
		}
	}()
	for w := range sp.workers {
		wjs, err := connect(fmt.Sprintf("edgeq bench worker %d", w))
		if err != nil {
			return res, err
		}
		for k, name := range consumers {
			if len(consumers) > 1 && k%sp.workers != w {
				continue // partitions are spread over the workers
			}
			c, err := wjs.Consumer(ctx, stream, name)
			if err != nil {
				return res, fmt.Errorf("consumer %s: %w", name, err)
			}
			cc, err := c.Consume(handler, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if !errors.Is(err, jetstream.ErrNoHeartbeat) {
					errs.Add(1)
				}
			}))
			if err != nil {
				return res, fmt.Errorf("consume %s: %w", name, err)
			}
			stops = append(stops, cc)
		}
	}
	select {
	case <-tr.done:
	case <-ctx.Done():
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return res, fmt.Errorf("only %d of %d messages delivered", tr.distinct, sp.total)
	}
	res.DeliverPerSec = float64(sp.total) / time.Since(drainStart).Seconds()
	if cpu1, ok := procCPU(pid); ok && cpuOK {
		res.ServerCPU = cpu1 - cpu0
	}
	tr.mu.Lock()
	res.OutOfOrder, res.Overlaps, res.Redeliveries = tr.outOfOrder, tr.overlaps, tr.redeliveries
	tr.mu.Unlock()
	res.Errors = errs.Load()
	return res, nil
}

// publishOrdered publishes publisher p's share with PublishAsync, at most
// sp.window waiting for their pub-ack (errors are counted by the
// connection's handler). Payload: 8 bytes run nonce, 8 bytes
// message number (device = number % devices), padding.
func publishOrdered(ctx context.Context, js jetstream.JetStream, sc jsScenario, sp jsOrderedSpec, p int, nonce uint64) error {
	subjects := make(map[int]string)
	for i := 0; i < sp.total; i++ {
		d := i % sp.devices
		if d%sp.pubs != p {
			continue
		}
		subj, ok := subjects[d]
		if !ok {
			subj = sc.deviceSubject(d)
			subjects[d] = subj
		}
		payload := make([]byte, max(sp.size, 16)) // PublishAsync keeps it until its ack
		binary.LittleEndian.PutUint64(payload, nonce)
		binary.LittleEndian.PutUint64(payload[8:], uint64(i))
		if _, err := js.PublishAsync(subj, payload, jetstream.WithStallWait(time.Minute)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return errors.New("pub-acks missing")
	}
}

// listenerPID is the process listening on the loopback address of the NATS
// URL u, found through /proc (0 when it is not on this host or not ours to
// read).
func listenerPID(u string) int {
	pu, err := url.Parse(u)
	if err != nil {
		return 0
	}
	host, port := pu.Hostname(), pu.Port()
	if port == "" {
		port = "4222"
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	pn, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "0A" { // LISTEN
				continue
			}
			if i := strings.LastIndexByte(fs[1], ':'); i >= 0 {
				if p, err := strconv.ParseUint(fs[1][i+1:], 16, 32); err == nil && int(p) == pn {
					inodes["socket:["+fs[9]+"]"] = true
				}
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); err == nil && inodes[l] {
				return pid
			}
		}
	}
	return 0
}

// procCPU is a process's user+system CPU seconds (USER_HZ 100).
func procCPU(pid int) (float64, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fs := strings.Fields(s[i+1:]) // fs[0] is field 3 (state)
	if len(fs) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseFloat(fs[11], 64)
	st, err2 := strconv.ParseFloat(fs[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (ut + st) / 100, true
}
