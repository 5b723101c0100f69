package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"edgeq/discovery/election"
	"edgeq/discovery/mdns"
	"edgeq/gateway/cluster"
	"edgeq/gateway/config"
	"edgeq/gateway/dispatch"
	"edgeq/gateway/metrics"
)

// clusterNode joins this node to its cluster: peer connections, leader
// election per queue group, mDNS discovery, and the data path between
// nodes (peerLink): each queue group is delivered by its leader from every
// node's log to every node's members.
type clusterNode struct {
	cfg     config.Cluster
	logger  *slog.Logger
	mgr     *cluster.Manager
	elector *cluster.Elector
	link    *peerLink
	resp    *mdns.Responder
	browser *mdns.Browser

	// Until the startup grace ends, groups wait here for their elections.
	gmu      sync.Mutex
	electing bool
	waiting  []string // bound: queue.max_groups
}

// ClusterStatus is the cluster part of /v1/status.
type ClusterStatus struct {
	Name   string `json:"name"`
	Listen string `json:"listen"` // this node's peer listener
	// Peers are the connected peers (state up), sorted by node.
	Peers []cluster.PeerStatus `json:"peers"`
	// Unreachable are the addresses to dial (static or discovered) without
	// a connection: a peer that is down, or an address that never answered
	// (no node).
	Unreachable []cluster.AddrStatus `json:"unreachable"`
	// Leaders are keyed by group ("<filter> <queue>"); a group still being
	// elected has none.
	Leaders map[string]GroupLeader `json:"leaders"`
	Refused uint64                 `json:"refused_peers"` // = peer_events.refused_handshakes
	// PeerEvents, Election and DataPath are totals since the node started.
	PeerEvents PeerEvents     `json:"peer_events"`
	Election   ElectionEvents `json:"election"`
	DataPath   DataPathEvents `json:"data_path"`
}

// GroupLeader is one queue group's elected leader.
type GroupLeader struct {
	Leader string `json:"leader"`
	Epoch  string `json:"epoch"`
	Self   bool   `json:"self"`
}

// PeerEvents count what happened to peer connections.
type PeerEvents struct {
	// RefusedHandshakes: another cluster, or a wrong secret.
	RefusedHandshakes uint64 `json:"refused_handshakes"`
	// SendQueueOverflows: connections closed because the peer did not
	// keep up with what this node sent it.
	SendQueueOverflows uint64 `json:"send_queue_overflows"`
	Ups                uint64 `json:"ups"`
	Downs              uint64 `json:"downs"`
	// RefusedFrames: sealed peer frames that failed authentication
	// (altered, injected, dropped, reordered or replayed on the way).
	RefusedFrames uint64 `json:"refused_frames"`
	// BusyHandshakes: connections closed unread because too many were in
	// the handshake; FailedHandshakes: deadline, malformed or oversized.
	BusyHandshakes   uint64 `json:"busy_handshakes"`
	FailedHandshakes uint64 `json:"failed_handshakes"`
}

// ElectionEvents are the election machine's counters, over all groups.
type ElectionEvents struct {
	Elections   uint64 `json:"elections"`   // elections started
	Leaderships uint64 `json:"leaderships"` // leaderships won by this node
	// TakeOvers: hand-overs this node asked of a sitting leader as the
	// higher-ranked node; HandOverTimeouts: of those, completed without the
	// old leader's DRAINED.
	TakeOvers        uint64 `json:"take_overs"`
	HandOverTimeouts uint64 `json:"hand_over_timeouts"`
	// HandOvers: leaderships this node handed to a higher-ranked one;
	// DrainTimeouts: hand-overs given up waiting for the drain here.
	HandOvers     uint64 `json:"hand_overs"`
	DrainTimeouts uint64 `json:"drain_timeouts"`
	// Deposed: leaderships ended by a newer epoch (or the group removed).
	Deposed uint64 `json:"deposed"`
	// StaleCoordinators: COORDINATOR messages refused for an old epoch.
	StaleCoordinators uint64 `json:"stale_coordinators"`
	// Fenced: fetches and commits refused for an old epoch.
	Fenced uint64 `json:"fenced"`
}

// DataPathEvents count the queue groups' traffic between nodes.
type DataPathEvents struct {
	// ForwardsIn: deliveries other nodes' leaders forwarded to members
	// here; ForwardsRefused: of those, the ones no member here could take.
	ForwardsIn      uint64 `json:"forwards_in"`
	ForwardsRefused uint64 `json:"forwards_refused"`
	// AcksRelayed: acknowledgements of members here sent to the leader.
	AcksRelayed uint64 `json:"acks_relayed"`
	// RemoteCommits and RemoteCommitFailures: commits of offsets this
	// node, as a leader, stored at the partitions' owners.
	RemoteCommits        uint64 `json:"remote_commits"`
	RemoteCommitFailures uint64 `json:"remote_commit_failures"`
	// FencedRequests: requests of other nodes' leaders refused here (an
	// old epoch, as in election.fenced, or epochs that could not be stored).
	FencedRequests uint64 `json:"fenced_requests"`
}

func newClusterNode(cfg config.Config, id, version string, partitions int, logger *slog.Logger) (*clusterNode, error) {
	cl := cfg.Cluster
	secret := []byte(cl.Secret)
	if cl.SecretFile != "" {
		b, err := readSecretFile(cl.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("cluster.secret_file: %w", err)
		}
		secret = []byte(strings.TrimSpace(string(b)))
		if len(secret) < 16 {
			return nil, fmt.Errorf("cluster.secret_file: the secret must be at least 16 bytes")
		}
	}
	c := &clusterNode{cfg: cl, logger: logger.With("component", "cluster")}
	h := &clusterHandler{}
	mgr, err := cluster.NewManager(cluster.ManagerConfig{
		Identity: cluster.Identity{Cluster: cl.Name, Node: id, Secret: secret}, Priority: cl.Priority,
		Partitions: partitions, Listen: cl.Listen, Advertise: cl.Advertise, Peers: cl.Peers, HeartbeatInterval: cl.HeartbeatInterval,
		FailureTimeout: cl.FailureTimeout, Logger: c.logger,
	}, h)
	if err != nil {
		return nil, err
	}
	c.link = newPeerLink(mgr, c.logger)
	ec := election.DefaultConfig(election.NodeID(id))
	ec.Priority = cl.Priority
	el, err := cluster.NewElector(cluster.ElectorConfig{Election: ec, DataDir: cfg.DataDir, Logger: c.logger}, mgr, c.link)
	if err != nil {
		return nil, err
	}
	h.el, h.link = el, c.link
	c.mgr, c.elector, c.link.elector = mgr, el, el
	if cl.MDNSEnabled() {
		_, portStr, _ := net.SplitHostPort(cl.Listen)
		port, _ := strconv.Atoi(portStr)
		mc := mdns.DefaultConfig()
		mc.Interface = cl.Interface
		mc.Logger = c.logger
		self := mdns.Node{ID: id, Cluster: cl.Name, Priority: cl.Priority, Version: mdnsVersion(version), PeerPort: port}
		if cl.Advertise != "" { // validated: an IP and a port
			host, p, _ := net.SplitHostPort(cl.Advertise)
			self.PeerPort, _ = strconv.Atoi(p)
			self.Addrs = []net.IP{net.ParseIP(host)}
		}
		if c.resp, err = mdns.NewResponder(mc, self); err != nil {
			return nil, fmt.Errorf("cluster: mdns: %w", err)
		}
		if c.browser, err = mdns.NewBrowser(mc, self); err != nil {
			return nil, fmt.Errorf("cluster: mdns: %w", err)
		}
	}
	return c, nil
}

// mdnsVersion keeps the TXT version printable without spaces.
func mdnsVersion(v string) string {
	v = strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, v)
	if v == "" {
		return "dev"
	}
	return v[:min(len(v), 64)]
}

// clusterHandler hands peer events to the elector and the data path once
// they exist.
type clusterHandler struct {
	el   *cluster.Elector
	link *peerLink
}

func (h *clusterHandler) PeerUp(n string, p cluster.PeerInfo) {
	h.el.PeerUp(n, p.Priority)
	h.link.PeerUp(n, p)
}

func (h *clusterHandler) PeerDown(n string) {
	h.el.PeerDown(n)
	h.link.PeerDown(n)
}

func (h *clusterHandler) Frame(n string, f cluster.Frame) {
	if f.Type == cluster.TypeElection {
		h.el.Frame(n, f)
		return
	}
	h.link.Frame(n, f)
}

// attach gives the data path the node's registry and core publisher.
func (c *clusterNode) attach(reg *dispatch.Registry, publish func(subject string, header, payload []byte)) {
	c.link.reg, c.link.publish = reg, publish
}

// addGroup elects a leader for a queue group (after the startup grace).
func (c *clusterNode) addGroup(key dispatch.GroupKey) {
	c.gmu.Lock()
	if !c.electing {
		if !slices.Contains(c.waiting, key.String()) {
			c.waiting = append(c.waiting, key.String())
		}
		c.gmu.Unlock()
		return
	}
	c.gmu.Unlock()
	c.addElection(key.String())
}

func (c *clusterNode) addElection(name string) {
	if err := c.elector.AddGroup(name); err != nil && !errors.Is(err, election.ErrGroupExists) {
		c.logger.Warn("election group", "group", name, "err", err)
	}
}

func (c *clusterNode) start(ctx context.Context, bg func(func())) error {
	if err := c.mgr.Start(ctx); err != nil {
		return err
	}
	bg(func() { c.elector.Run(ctx) })
	bg(func() { c.link.runSync(ctx) })
	bg(func() { c.awaitPeers(ctx) })
	bg(func() { <-ctx.Done(); c.mgr.Wait() })
	if c.resp != nil {
		if err := c.resp.Start(); err != nil {
			return fmt.Errorf("cluster: mdns responder: %w", err)
		}
		bg(func() {
			if err := c.browser.Run(ctx); err != nil && ctx.Err() == nil {
				c.logger.Error("mdns browser stopped", "err", err)
			}
		})
		bg(func() { c.feedDiscovered(ctx) })
	}
	c.logger.Info("cluster started", "name", c.cfg.Name, "listen", c.mgr.Addr(), "mdns", c.resp != nil)
	return nil
}

// feedDiscovered hands the addresses mDNS finds to the peer manager as soon
// as they change.
func (c *clusterNode) feedDiscovered(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var addrs []string
		for _, p := range c.browser.Peers() {
			if p.Dial != "" {
				addrs = append(addrs, p.Dial)
			}
		}
		c.mgr.SetDiscovered(addrs)
		select {
		case <-ctx.Done():
			return
		case <-c.browser.Updates():
		case <-t.C:
		}
	}
}

// startupGrace bounds how long a starting node waits for its peers before
// it takes part in elections. A node that elected itself before it saw the
// sitting leader would depose it without the safe hand-over (and, at a cold
// start, every node would lead every group for a moment).
const startupGrace = 3 * time.Second

// awaitPeers ends the startup grace: once mDNS has browsed once and every
// address found (or configured) is connected, or at startupGrace, the
// groups waiting for it join their elections.
func (c *clusterNode) awaitPeers(ctx context.Context) {
	deadline := time.NewTimer(startupGrace)
	defer deadline.Stop()
	if c.browser != nil {
		select {
		case <-c.browser.FirstRound():
		case <-deadline.C:
		case <-ctx.Done():
			return
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for !c.settled() {
		select {
		case <-tick.C:
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			return
		}
	}
	c.gmu.Lock()
	c.electing = true
	waiting := c.waiting
	c.waiting = nil
	c.gmu.Unlock()
	c.logger.Info("taking part in elections", "peers", len(c.mgr.Peers()), "groups", len(waiting))
	for _, name := range waiting {
		c.addElection(name)
	}
}

// settled: every address to dial is connected and every peer mDNS found.
func (c *clusterNode) settled() bool {
	if !c.mgr.AllDialed() {
		return false
	}
	if c.browser != nil {
		for _, p := range c.browser.Peers() {
			if p.Dial != "" && !c.mgr.Connected(p.ID) {
				return false
			}
		}
	}
	return true
}

func (c *clusterNode) stop() {
	if c.resp != nil {
		if err := c.resp.Stop(); err != nil { // says goodbye
			c.logger.Warn("mdns responder stop", "err", err)
		}
	}
}

// snapshot copies the cluster's state for /metrics and /v1/status: the
// peer connections and the manager's counters, the leaders of groups and
// the election's counters (under one hold of the elector's lock), and which
// groups this node leads.
func (c *clusterNode) snapshot(groups []dispatch.GroupStats) *metrics.ClusterStats {
	cs := &metrics.ClusterStats{Name: c.cfg.Name, Listen: c.mgr.Addr(), Peers: c.mgr.Peers(),
		Unreachable: c.mgr.Unreachable(), Manager: c.mgr.Counters(), FencedRequests: c.link.fencedReqs.Load(),
		Leaders: make(map[dispatch.GroupKey]metrics.Leader, len(groups))}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.Key.String()
	}
	var leaders []cluster.GroupLeader
	leaders, cs.Election = c.elector.Leaders(names)
	c.link.mu.Lock()
	for _, l := range leaders {
		_, self := c.link.leading[l.Group]
		cs.Leaders[groupKey(l.Group)] = metrics.Leader{Node: l.Leader, Epoch: l.Epoch, Self: self}
	}
	c.link.mu.Unlock()
	return cs
}

// clusterStatusOf is the cluster part of /v1/status from a snapshot's.
func clusterStatusOf(cs *metrics.ClusterStats, d dispatch.Counters) *ClusterStatus {
	el, m := cs.Election, cs.Manager
	st := &ClusterStatus{Name: cs.Name, Listen: cs.Listen, Peers: cs.Peers, Unreachable: cs.Unreachable,
		Leaders: make(map[string]GroupLeader, len(cs.Leaders)), Refused: m.Refused,
		PeerEvents: PeerEvents{RefusedHandshakes: m.Refused, SendQueueOverflows: m.Overflows, Ups: m.Ups, Downs: m.Downs,
			RefusedFrames: m.FramesRefused, BusyHandshakes: m.HandshakesBusy, FailedHandshakes: m.HandshakeFailures},
		Election: ElectionEvents{Elections: el.Elections, Leaderships: el.Leaderships, TakeOvers: el.TakeOvers,
			HandOverTimeouts: el.HandOverTimeouts, HandOvers: el.HandOvers, DrainTimeouts: el.DrainTimeouts,
			Deposed: el.Deposed, StaleCoordinators: el.Stale, Fenced: el.Fenced},
		DataPath: DataPathEvents{ForwardsIn: d.ForwardsIn, ForwardsRefused: d.ForwardsRefused, AcksRelayed: d.AcksRelayed,
			RemoteCommits: d.RemoteCommits, RemoteCommitFailures: d.RemoteCommitFailures, FencedRequests: cs.FencedRequests},
	}
	// Lists are [] rather than null in the JSON.
	if st.Peers == nil {
		st.Peers = []cluster.PeerStatus{}
	}
	if st.Unreachable == nil {
		st.Unreachable = []cluster.AddrStatus{}
	}
	for k, l := range cs.Leaders {
		st.Leaders[k.String()] = GroupLeader{Leader: l.Node, Epoch: l.Epoch.String(), Self: l.Self}
	}
	return st
}

// readSecretFile reads a secret that only its owner may read or write: a
// group- or world-accessible file is refused, as ssh refuses such keys.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o, readable or writable by group or others: chmod 0600 it (owned by the service user)", path, m)
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
