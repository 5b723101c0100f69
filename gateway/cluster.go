package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
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
// election per queue group, mDNS discovery. Delivery across nodes is not
// built yet: leadership is reported (status, logs), each node still delivers
// its own log to its own members.
type clusterNode struct {
	cfg     config.Cluster
	logger  *slog.Logger
	mgr     *cluster.Manager
	elector *cluster.Elector
	resp    *mdns.Responder
	browser *mdns.Browser

	mu      sync.Mutex
	leading map[string]election.Epoch // groups this node leads; bound: queue.max_groups
}

// ClusterStatus is the cluster part of /v1/status.
type ClusterStatus struct {
	Name    string                 `json:"name"`
	Listen  string                 `json:"listen"`
	Peers   []cluster.PeerStatus   `json:"peers"`
	Leaders map[string]GroupLeader `json:"leaders"`
	Refused uint64                 `json:"refused_peers"`
	Note    string                 `json:"note"`
}

// GroupLeader is one queue group's elected leader.
type GroupLeader struct {
	Leader string `json:"leader"`
	Epoch  string `json:"epoch"`
	Self   bool   `json:"self"`
}

func newClusterNode(cfg config.Config, id, version string, logger *slog.Logger) (*clusterNode, error) {
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
	c := &clusterNode{cfg: cl, logger: logger.With("component", "cluster"), leading: map[string]election.Epoch{}}
	h := &clusterHandler{}
	mgr, err := cluster.NewManager(cluster.ManagerConfig{
		Identity: cluster.Identity{Cluster: cl.Name, Node: id, Secret: secret}, Priority: cl.Priority,
		Listen: cl.Listen, Peers: cl.Peers, HeartbeatInterval: cl.HeartbeatInterval,
		FailureTimeout: cl.FailureTimeout, Logger: c.logger,
	}, h)
	if err != nil {
		return nil, err
	}
	ec := election.DefaultConfig(election.NodeID(id))
	ec.Priority = cl.Priority
	el, err := cluster.NewElector(cluster.ElectorConfig{Election: ec, DataDir: cfg.DataDir, Logger: c.logger}, mgr, c)
	if err != nil {
		return nil, err
	}
	h.el = el
	c.mgr, c.elector = mgr, el
	if cl.MDNSEnabled() {
		_, portStr, _ := net.SplitHostPort(cl.Listen)
		port, _ := strconv.Atoi(portStr)
		mc := mdns.DefaultConfig()
		mc.Interface = cl.Interface
		mc.Logger = c.logger
		self := mdns.Node{ID: id, Cluster: cl.Name, Priority: cl.Priority, Version: mdnsVersion(version), PeerPort: port}
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

// clusterHandler forwards peer events to the elector once it exists.
type clusterHandler struct{ el *cluster.Elector }

func (h *clusterHandler) PeerUp(n string, p cluster.PeerInfo) { h.el.PeerUp(n, p.Priority) }
func (h *clusterHandler) PeerDown(n string)                   { h.el.PeerDown(n) }
func (h *clusterHandler) Frame(n string, f cluster.Frame)     { h.el.Frame(n, f) }

// Lead and StepDown make the node the elector's Leadership: for now they
// record and log (a hand-over has nothing to drain yet).
func (c *clusterNode) Lead(group string, epoch election.Epoch) {
	c.mu.Lock()
	c.leading[group] = epoch
	c.mu.Unlock()
	c.logger.Info("leading queue group", "group", group, "epoch", epoch.String())
}

// StepDown stops leading group.
func (c *clusterNode) StepDown(group string, epoch election.Epoch, handOver bool) {
	c.mu.Lock()
	delete(c.leading, group)
	c.mu.Unlock()
	c.logger.Info("stepping down", "group", group, "epoch", epoch.String(), "hand_over", handOver)
	if handOver {
		go c.elector.Drained(group, epoch) // called outside the elector's lock
	}
}

// addGroup elects a leader for a queue group.
func (c *clusterNode) addGroup(key dispatch.GroupKey) {
	if err := c.elector.AddGroup(key.String()); err != nil && !strings.Contains(err.Error(), "exists") {
		c.logger.Warn("election group", "group", key.String(), "err", err)
	}
}

func (c *clusterNode) start(ctx context.Context, bg func(func())) error {
	if err := c.mgr.Start(ctx); err != nil {
		return err
	}
	bg(func() { c.elector.Run(ctx) })
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

// feedDiscovered hands addresses found by mDNS to the peer manager.
func (c *clusterNode) feedDiscovered(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, p := range c.browser.Peers() {
				if p.Dial != "" {
					c.mgr.AddAddr(p.Dial)
				}
			}
		}
	}
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
		Refused: c.mgr.Refused(), Note: "leaders are elected; delivery across nodes is not built yet (each node delivers its own log)"}
	for _, g := range groups {
		name := g.Key.String()
		leader, epoch, ok := c.elector.Leader(name)
		if !ok {
			continue
		}
		c.mu.Lock()
		_, mine := c.leading[name]
		c.mu.Unlock()
		st.Leaders[name] = GroupLeader{Leader: leader, Epoch: epoch.String(), Self: mine}
	}
	return st
}
