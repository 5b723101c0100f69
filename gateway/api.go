package gateway

import (
	"net/http"

	"edgeq/gateway/groups"
	"edgeq/gateway/hot"
	"edgeq/gateway/httpapi"
	"edgeq/gateway/nodestats"
	"edgeq/internal/secret"
)

// The node as the HTTP API sees it.
var _ httpapi.Node = (*Node)(nil)

// newAPI wires the groups admin and the HTTP API (which listens from Start).
func (n *Node) newAPI() {
	cfg := n.cfg
	gc := httpapi.GroupsConfig{NodeID: n.id, TelemetryPrefix: cfg.NATS.TelemetryPrefix, GroupTTL: cfg.Queue.GroupTTL,
		Registry: n.queues, Uplinks: n.uplinkKeys}
	for _, g := range cfg.Groups {
		gc.Declared = append(gc.Declared, groups.GroupKey{Filter: g.Subject, Queue: g.Queue})
	}
	if n.cluster != nil { // not a nil *cluster.Node in an interface
		gc.Cluster = n.cluster
	}
	if n.js != nil {
		gc.JetStream = n.js
	}
	n.groupsAdmin = httpapi.NewGroups(gc)
	ac := httpapi.Config{Listen: cfg.HTTP.Listen, TLS: n.httpTLS, NodeID: n.id, DataDir: cfg.DataDir,
		Durability: string(cfg.WAL.Durability), Token: func() secret.String { return *n.httpToken.Load() },
		NSQToken: cfg.NSQ.AuthToken, Console: cfg.HTTP.Console, EventsInterval: cfg.HTTP.EventsInterval,
		MaxEventStreams: cfg.HTTP.MaxEventStreams, MaxPayload: int64(cfg.NATS.MaxPayload), Started: n.started,
		Log: n.log, Ingest: n.ingest, Groups: n.groupsAdmin, Metrics: http.HandlerFunc(n.handleMetrics), NSQ: n.nsq}
	n.api = httpapi.New(ac, n, n.logger)
	n.events = n.api.Events()
}

// API is the node's HTTP API.
func (n *Node) API() *httpapi.Server { return n.api }

// Ready: the node started and is not draining.
func (n *Node) Ready() bool { return n.ready.Load() }

// Snapshot copies what /metrics and /v1/status show.
func (n *Node) Snapshot(top int, device bool) nodestats.Snapshot { return n.snapshot(top, device) }

// HotDevice is the hot-device detector's view of device.
func (n *Node) HotDevice(device string) (hot.DeviceRate, bool) {
	in := n.ingest
	if in.hot == nil {
		return hot.DeviceRate{}, false
	}
	in.hotMu.Lock()
	defer in.hotMu.Unlock()
	return in.hot.Lookup(device)
}

// uplinkKeys are the running uplinks' groups, in the order of n.uplinks.
func (n *Node) uplinkKeys() []groups.GroupKey {
	n.bridgesMu.RLock()
	defer n.bridgesMu.RUnlock()
	keys := make([]groups.GroupKey, len(n.uplinks))
	for i, r := range n.uplinks {
		keys[i] = r.key
	}
	return keys
}
