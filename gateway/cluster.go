package gateway

import (
	"context"
	"errors"
	"fmt"
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
	Name    string                 `json:"name"`
	Listen  string                 `json:"listen"`
	Peers   []cluster.PeerStatus   `json:"peers"`
	Leaders map[string]GroupLeader `json:"leaders"`
	Refused uint64                 `json:"refused_peers"`
}

// GroupLeader is one queue group's elected leader.
type GroupLeader struct {
	Leader string `json:"leader"`
	Epoch  string `json:"epoch"`
	Self   bool   `json:"self"`
}

func newClusterNode(cfg config.Config, id, version string, partitions int, logger *slog.Logger) (*clusterNode, error) {
	cl := cfg.Cluster
	secret := []byte(cl.Secret)
	if cl.SecretFile != "" {
		b, err := os.ReadFile(cl.SecretFile)
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

func (c *clusterNode) status(groups []dispatch.GroupStats) *ClusterStatus {
	st := &ClusterStatus{Name: c.cfg.Name, Listen: c.mgr.Addr(), Peers: c.mgr.Peers(), Leaders: map[string]GroupLeader{},
		Refused: c.mgr.Refused()}
	for _, g := range groups {
		name := g.Key.String()
		leader, epoch, ok := c.elector.Leader(name)
		if !ok {
			continue
		}
		st.Leaders[name] = GroupLeader{Leader: leader, Epoch: epoch.String(), Self: c.link.Leading(name)}
	}
	return st
}
