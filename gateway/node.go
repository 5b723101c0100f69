// Package gateway wires an edgeq node together: the log, ingest, queue
// groups, the NATS, NSQ and HTTP front ends, bridges, uplinks and the
// cluster, with a graceful lifecycle. It only wires: each part lives in a
// package of its own (the HTTP API in gateway/httpapi, which meets the node
// through httpapi.Node, implemented here).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/gateway/cluster"
	"edgeq/gateway/config"
	"edgeq/gateway/console"
	"edgeq/gateway/groups"
	"edgeq/gateway/hot"
	"edgeq/gateway/httpapi"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsserver"
	"edgeq/gateway/nsqserver"
	"edgeq/gateway/tlsconf"
	"edgeq/internal/secret"
	"edgeq/wal"
)

// Node is one running edgeq node.
type Node struct {
	cfg     config.Config
	id      string
	version string
	logger  *slog.Logger
	started time.Time

	log    *wal.Log
	ingest *Ingest
	queues *groups.Registry
	tail   *groups.Tail
	nats   *natsserver.Server
	nsq    *nsqserver.Server // nil unless nsq.listen is set
	js     *jsapi.Service    // nil when jetstream.enabled is false
	dedup  *jsapi.Dedup

	serial  []*serial.Port
	cluster *cluster.Node // nil unless cluster.name is set
	mqtt    []*mqtt.Bridge
	modbus  []*modbus.Bus
	uplinks []*uplinkRun
	// bridgesMu guards the four lists above and bridgeCfg, which a reload
	// changes while status and metrics read them.
	bridgesMu sync.RWMutex
	bridgeCfg bridgeConfigs // the configs the running bridges and uplinks were made from
	stopping  bool          // Shutdown has taken the lists
	runCtx    context.Context
	// httpToken is http.token, swapped by a reload.
	httpToken atomic.Pointer[secret.String]

	metrics *nodeMetrics

	api         *httpapi.Server
	groupsAdmin *httpapi.Groups
	events      *console.Hub // the console's snapshot stream (/v1/events); nil when HTTP is off
	// TLS material of the NATS, HTTP and NSQ listeners (nil: plaintext,
	// or NSQ off); Reload reads their files again.
	natsTLS, httpTLS, nsqTLS *tlsconf.Store
	reloadMu                 sync.Mutex
	applied                  *config.Config // the last config Reload applied; nil: cfg

	ready    atomic.Bool
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// NewNode opens the data directory and builds the node; Start serves.
func NewNode(cfg config.Config, version string, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	natsTLS, err := loadTLS("nats.tls", cfg.NATS.TLS)
	if err != nil {
		return nil, err
	}
	httpTLS, err := loadTLS("http.tls", cfg.HTTP.TLS)
	if err != nil {
		return nil, err
	}
	nsqTLS, err := loadTLS("nsq.tls", nsqTLSOf(cfg))
	if err != nil {
		return nil, err
	}
	id, err := LoadNodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	logger = logger.With("node", id)
	l, err := wal.Open(cfg.DataDir+"/wal", cfg.WALOptions(), logger)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, id: id, version: version, logger: logger, log: l, started: time.Now(), natsTLS: natsTLS, httpTLS: httpTLS, nsqTLS: nsqTLS}
	n.bridgeCfg = bridgeConfigsOf(cfg)
	token := cfg.HTTP.Token
	n.httpToken.Store(&token)
	if n.metrics, err = newNodeMetrics(cfg, logger); err != nil {
		l.Close()
		return nil, err
	}
	for _, pr := range l.Report().Partitions {
		if pr.Repaired() {
			logger.Warn("log repaired at start", "partition", pr.Partition, "torn_bytes", pr.TornBytes, "bad_tail_records", pr.BadTail)
		}
	}
	var det *hot.Detector
	if cfg.Hot.Enabled {
		hc := hot.DefaultConfig()
		hc.Window, hc.Factor, hc.MinRate, hc.MaxDevices = cfg.Hot.Window, cfg.Hot.Factor, cfg.Hot.MinRate, cfg.WAL.MaxDevices
		hc.MoveBackBacklog = cfg.Hot.MoveBackBacklog
		if det, err = hot.New(hc); err != nil {
			l.Close()
			return nil, err
		}
	}
	n.ingest = newIngest(l, det, logger)
	n.tail = groups.NewTail(l, cfg.NATS.TelemetryPrefix, id, logger)
	var onGroup func(groups.GroupKey)
	var peers groups.Peers
	var expireLed func(groups.GroupKey) error
	if cfg.Cluster.Name != "" {
		if n.cluster, err = cluster.NewNode(cfg, id, version, l.NumPartitions(), logger); err != nil {
			l.Close()
			return nil, err
		}
		onGroup, peers, expireLed = n.cluster.AddGroup, n.cluster.Peers(), n.cluster.RemoveGroup
	}
	n.queues = groups.NewRegistry(groups.Config{
		Node:            id,
		TelemetryPrefix: cfg.NATS.TelemetryPrefix,
		Defaults:        queueConfig(cfg, config.Group{}),
		GroupTTL:        cfg.Queue.GroupTTL,
		MaxGroups:       cfg.Queue.MaxGroups,
		ReadAheadBudget: int64(cfg.Queue.ReadAheadBudget),
		OnGroup:         onGroup,
		ExpireLed:       expireLed,
		Peers:           peers,
		DeadLetters:     n.publishDeadLetter,
	}, l, logger)
	if n.cluster != nil {
		n.cluster.Attach(n.queues)
	}
	users, perms := natsUsers(cfg.NATS)
	var js *jsapi.Service
	var dedup *jsapi.Dedup
	if j := cfg.JetStream; j.Enabled {
		js = jsapi.NewService(jsapi.Config{Stream: j.Stream, Prefix: cfg.NATS.TelemetryPrefix, MaxConsumers: j.MaxConsumers,
			DuplicateWindow: j.DuplicateWindow, MaxBytes: int64(cfg.WAL.MaxBytes), MaxAge: cfg.WAL.MaxAge,
			Defaults: queueConfig(cfg, config.Group{}), StateFile: filepath.Join(cfg.DataDir, "jetstream-consumers.json"),
			Clustered: cfg.Cluster.Name != "", KVBucket: j.KVBucket, MaxDevices: cfg.WAL.MaxDevices, MaxOrdered: j.MaxOrdered,
			MaxOrderedPerConn: j.MaxOrderedPerConn, DeleteGroup: func(k groups.GroupKey) error { return n.groupsAdmin.DeleteKey(k) }, Logger: logger}, l, n.queues)
		if j.DuplicateWindow > 0 {
			dedup = jsapi.NewDedup(j.DuplicateWindow, j.MaxMsgIDs, nil)
		}
	}
	n.js, n.dedup = js, dedup
	n.nats = natsserver.New(natsserver.Config{
		Listen:           cfg.NATS.Listen,
		AuthToken:        cfg.NATS.AuthToken.Reveal(),
		Users:            users,
		Perms:            perms,
		TelemetryPrefix:  cfg.NATS.TelemetryPrefix,
		MaxPayload:       int(cfg.NATS.MaxPayload),
		MaxControlLine:   int(cfg.NATS.MaxControlLine),
		MaxConnections:   cfg.NATS.MaxConnections,
		MaxSubscriptions: cfg.NATS.MaxSubscriptions,
		MaxGroupsPerConn: cfg.NATS.MaxGroupsPerConnection,
		MaxPending:       int(cfg.NATS.MaxPending),
		WriteDeadline:    cfg.NATS.WriteDeadline,
		PingInterval:     cfg.NATS.PingInterval,
		MaxPingsOut:      cfg.NATS.MaxPingsOut,
		AuthTimeout:      cfg.NATS.AuthTimeout,
		NodeID:           id,
		Version:          infoVersion(cfg, version),
		EdgeqVersion:     version,
		JetStream:        js,
		QueueJSAcks:      cfg.JetStream.Enabled && cfg.JetStream.QueueAckSubjects,
		Dedup:            dedup,

		TLS:               natsTLS,
		TLSHandshakeFirst: cfg.NATS.TLS.HandshakeFirst,
		TLSFallback:       cfg.NATS.TLS.HandshakeFirstFallback,
	}, n.ingest, n.queues, n.tail, logger)
	if js != nil {
		// After the server set its hooks: push consumers get its members.
		if err := js.Restore(); err != nil {
			l.Close()
			return nil, fmt.Errorf("jetstream consumers: %w", err)
		}
	}
	if nc := cfg.NSQ; nc.Listen != "" {
		n.nsq = nsqserver.New(nsqserver.Config{
			Listen:            nc.Listen,
			AuthToken:         nc.AuthToken,
			TelemetryPrefix:   cfg.NATS.TelemetryPrefix,
			DeviceField:       nc.DeviceField,
			MaxRdyCount:       nc.MaxRdyCount,
			MaxMsgSize:        int(nc.MaxMsgSize),
			MaxBodySize:       int(nc.MaxBodySize),
			MaxConnections:    nc.MaxConnections,
			MaxPending:        int(nc.MaxPending),
			MaxPendingPubs:    nc.MaxPendingPublishes,
			HeartbeatInterval: nc.HeartbeatInterval,
			MaxReqTimeout:     nc.MaxReqTimeout,
			WriteDeadline:     nc.WriteDeadline,
			AckWait:           cfg.Queue.AckWait,
			NodeID:            id,
			Version:           version,
			TLS:               nsqTLS,
		}, n.ingest, n.queues, logger)
	}
	for _, sc := range cfg.Serial {
		p, err := serial.New(sc, n.ingest, logger)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("serial port %s: %w", sc.Name, err)
		}
		n.serial = append(n.serial, p)
	}
	for _, mc := range cfg.MQTT {
		b, err := mqtt.New(mqtt.Config(mc), id, n.ingest, logger)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("mqtt bridge %s: %w", mc.Name, err)
		}
		n.mqtt = append(n.mqtt, b)
	}
	for _, g := range cfg.Groups {
		if err := n.queues.Declare(groups.GroupConfig{Key: groups.GroupKey{Filter: g.Subject, Queue: g.Queue}, Core: queueConfig(cfg, g)}); err != nil {
			l.Close()
			return nil, fmt.Errorf("declare group (%s, %s): %w", g.Subject, g.Queue, err)
		}
	}
	if err := n.openUplinks(); err != nil {
		l.Close()
		return nil, err
	}
	// Last: an RTU bus claims its serial path when it is made.
	for _, bc := range cfg.Modbus {
		b, err := modbus.New(modbus.Config(bc), n.ingest, logger)
		if err != nil {
			for _, m := range n.modbus {
				_ = m.Stop(0)
			}
			n.closeUplinks()
			l.Close()
			return nil, fmt.Errorf("modbus bus %s: %w", bc.Name, err)
		}
		n.modbus = append(n.modbus, b)
	}
	n.newAPI()
	return n, nil
}

// queueConfig merges a group's settings over the queue defaults. Groups
// created by a subscribe start at deliver: new; declared groups at all unless
// they say otherwise.
func queueConfig(cfg config.Config, g config.Group) groups.CoreConfig {
	qc := groups.DefaultCoreConfig()
	qc.AckWait = cfg.Queue.AckWait
	qc.MaxDeliver = cfg.Queue.MaxDeliver
	qc.MaxInFlight = cfg.Queue.MaxInFlight
	qc.ReadAheadMsgs = cfg.Queue.ReadAheadMsgs
	qc.ReadAheadBytes = int(cfg.Queue.ReadAheadBytes)
	qc.DeviceShareMsgs = cfg.Queue.DeviceShareMsgs
	qc.DeviceShareBytes = int(cfg.Queue.DeviceShareBytes)
	if g.Queue != "" && g.Deliver != "new" {
		qc.Deliver = groups.DeliverAll
	}
	if g.Ordering == "none" {
		qc.Ordering = groups.OrderNone
	}
	if g.Strategy == "sticky" {
		qc.Strategy = groups.StrategySticky
	}
	if g.AckWait > 0 {
		qc.AckWait = g.AckWait
	}
	if g.MaxDeliver > 0 {
		qc.MaxDeliver = g.MaxDeliver
	}
	if g.MaxInFlight > 0 {
		qc.MaxInFlight = g.MaxInFlight
	}
	return qc
}

// ID is the node's ID.
func (n *Node) ID() string { return n.id }

// Log is the node's telemetry log.
func (n *Node) Log() *wal.Log { return n.log }

// Ingest is the node's way into the log, for bridges.
func (n *Node) Ingest() *Ingest { return n.ingest }

// publishDeadLetter publishes dead letters to the NATS subscribers of
// $EQ.DLQ.<queue> once the server exists.
func (n *Node) publishDeadLetter(queueName string, d *groups.Delivery, reason string) {
	if n.nats != nil {
		n.nats.PublishDeadLetter(queueName, d, reason)
	}
}

// Start opens the listeners and background loops.
func (n *Node) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.runCtx = ctx
	n.goBackground(func() { n.tail.Run(ctx) })
	n.goBackground(func() { n.ingest.runHot(ctx) })
	n.goBackground(func() { n.expireGroups(ctx) })
	if n.js != nil {
		n.goBackground(func() { n.js.Run(ctx) })
	}
	if err := n.nats.Start(); err != nil {
		n.Shutdown(time.Second)
		return err
	}
	if n.nsq != nil {
		if err := n.nsq.Start(); err != nil {
			n.Shutdown(time.Second)
			return err
		}
	}
	if n.cluster != nil {
		if err := n.cluster.Start(ctx, n.goBackground); err != nil {
			n.Shutdown(time.Second)
			return err
		}
	}
	if err := n.api.Start(n.goBackground); err != nil {
		n.Shutdown(time.Second)
		return err
	}
	for _, p := range n.serial {
		if err := p.Start(ctx); err != nil {
			n.Shutdown(time.Second)
			return fmt.Errorf("serial port %s: %w", p.Name(), err)
		}
	}
	for i, b := range n.mqtt {
		if err := b.Start(ctx); err != nil {
			n.Shutdown(time.Second)
			return fmt.Errorf("mqtt bridge %s: %w", n.cfg.MQTT[i].Name, err)
		}
	}
	for _, b := range n.modbus {
		if err := b.Start(ctx); err != nil {
			n.Shutdown(time.Second)
			return fmt.Errorf("modbus bus %s: %w", b.Name(), err)
		}
	}
	if err := n.startUplinks(ctx); err != nil {
		n.Shutdown(time.Second)
		return err
	}
	n.ready.Store(true)
	n.logger.Info("edgeq node ready", "data_dir", n.cfg.DataDir, "durability", n.cfg.WAL.Durability,
		"partitions", n.cfg.WAL.Partitions, "hot_partitions", n.cfg.WAL.HotPartitions)
	return nil
}

func (n *Node) goBackground(f func()) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		f()
	}()
}

// expireInterval is how often groups past group_ttl are looked for: a
// quarter of it, between a second and a minute, so a group goes within
// group_ttl plus that.
func expireInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Second), time.Minute)
}

func (n *Node) expireGroups(ctx context.Context) {
	t := time.NewTicker(expireInterval(n.cfg.Queue.GroupTTL))
	defer t.Stop()
	// Commits that other nodes' leaders stored here become durable as
	// quickly as the leaders' own (a hand-over's final commits at once).
	var flush <-chan time.Time
	if n.cluster != nil {
		ft := time.NewTicker(groups.CommitInterval)
		defer ft.Stop()
		flush = ft.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n.queues.Expire(now)
		case <-flush:
			if err := n.queues.FlushOffsets(); err != nil {
				n.logger.Error("flush offsets", "err", err)
			}
		}
	}
}

// NATSAddr and HTTPAddr are the bound addresses (useful with port 0).
func (n *Node) NATSAddr() string { return n.nats.Addr().String() }

// NSQAddr is the NSQ listener's address, empty when NSQ is off.
func (n *Node) NSQAddr() string {
	if n.nsq == nil || n.nsq.Addr() == nil {
		return ""
	}
	return n.nsq.Addr().String()
}

// HTTPAddr is the HTTP listener's address, empty when HTTP is off.
func (n *Node) HTTPAddr() string { return n.api.Addr() }

// Shutdown drains the node: stop accepting, hand back or finish in-flight
// messages within timeout, commit offsets, sync and close the log.
func (n *Node) Shutdown(timeout time.Duration) error {
	n.stopOnce.Do(func() {
		n.ready.Store(false)
		deadline := time.Now().Add(timeout)
		n.logger.Info("draining", "timeout", timeout)
		n.nats.StopAccepting()
		if n.nsq != nil {
			n.nsq.StopAccepting()
		}
		// Bridges stop first: what they read is stored (and acked upstream)
		// before the log closes.
		n.bridgesMu.Lock()
		n.stopping = true // a reload after this starts nothing
		mqtts, mqttCfg, serials, buses := n.mqtt, n.bridgeCfg.mqtt, n.serial, n.modbus
		n.bridgesMu.Unlock()
		for i, b := range mqtts {
			if err := b.Stop(time.Until(deadline)); err != nil {
				n.logger.Warn("stop mqtt bridge", "bridge", mqttCfg[i].Name, "err", err)
			}
		}
		for _, p := range serials {
			if err := p.Stop(time.Until(deadline)); err != nil {
				n.logger.Warn("stop serial port", "port", p.Name(), "err", err)
			}
		}
		for _, b := range buses {
			if err := b.Stop(time.Until(deadline)); err != nil {
				n.logger.Warn("stop modbus bus", "bus", b.Name(), "err", err)
			}
		}
		// In a cluster, the leaders elsewhere hear that this node's members
		// take nothing more (credit 0). Groups led here hand over: they
		// deliver what is unfinished below what they delivered and wait for
		// in-flight acks while the connections are still open to carry
		// them. Then the members answer what other nodes' leaders forwarded
		// them before their connections close, so nothing they finished is
		// delivered again elsewhere.
		n.queues.Quiesce()
		n.queues.Drain(deadline)
		if !n.queues.WaitForwards(deadline) {
			n.logger.Warn("stopping with forwarded deliveries unanswered: their leaders deliver them again",
				"held", n.queues.Counters().ForwardsHeld)
		}
		n.closeUplinks()
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(time.Second))
		defer cancel()
		var errs []error
		if err := n.nats.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("nats shutdown: %w", err))
		}
		if n.nsq != nil {
			if err := n.nsq.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("nsq shutdown: %w", err))
			}
		}
		_ = n.api.Shutdown(ctx)
		if n.cluster != nil {
			n.cluster.Stop()
		}
		if n.cancel != nil {
			n.cancel()
		}
		n.bg.Wait()
		if err := n.log.Close(); err != nil {
			errs = append(errs, err)
		}
		n.stopErr = errors.Join(errs...)
		n.logger.Info("stopped", "err", n.stopErr)
	})
	return n.stopErr
}

// loadTLS reads a listener's TLS files; nil when TLS is off.
func loadTLS(key string, t config.TLS) (*tlsconf.Store, error) {
	if !t.Enabled() {
		return nil, nil
	}
	s, err := tlsconf.Load(tlsconf.Files{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile, Verify: t.Verify})
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", key, err)
	}
	return s, nil
}

// nsqTLSOf is nsq.tls, or none when the NSQ listener is off.
func nsqTLSOf(cfg config.Config) config.TLS {
	if cfg.NSQ.Listen == "" {
		return config.TLS{}
	}
	return cfg.NSQ.TLS
}

// natsUsers maps the configured NATS users to their passwords and permissions.
func natsUsers(c config.NATS) (map[string]string, map[string]*natsserver.Permissions) {
	users, perms := map[string]string{}, map[string]*natsserver.Permissions{}
	for _, u := range c.Users {
		users[u.User] = u.Password.Reveal()
		if p := u.Permissions; p != nil {
			perms[u.User] = &natsserver.Permissions{
				Publish:   natsserver.Rules{Allow: p.Publish.Allow, Deny: p.Publish.Deny},
				Subscribe: natsserver.Rules{Allow: p.Subscribe.Allow, Deny: p.Subscribe.Deny},
			}
		}
	}
	return users, perms
}

// infoVersion is the version NATS clients see: natsserver.InfoVersion
// (2.10.0+edgeq.<version>), or jetstream.info_version when set.
func infoVersion(cfg config.Config, version string) string {
	if cfg.JetStream.Enabled && cfg.JetStream.InfoVersion != "" {
		return cfg.JetStream.InfoVersion
	}
	return natsserver.InfoVersion(version)
}
