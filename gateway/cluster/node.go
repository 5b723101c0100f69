package cluster

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
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
)

// Node joins this node to its cluster: peer connections, leader election
// per queue group, mDNS discovery, and the data path between nodes
// (peerLink): each queue group is delivered by its leader from every node's
// log to every node's members.
type Node struct {
	cfg     config.Cluster
	logger  *slog.Logger
	mgr     *Manager
	elector *Elector
	link    *peerLink
	resp    *mdns.Responder
	browser *mdns.Browser

	// Until the startup grace ends, groups wait here for their elections.
	gmu      sync.Mutex
	electing bool
	waiting  []string // bound: queue.max_groups
}

func NewNode(cfg config.Config, id, version string, partitions int, logger *slog.Logger) (*Node, error) {
	cl := cfg.Cluster
	secret := []byte(cl.Secret.Reveal())
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
	c := &Node{cfg: cl, logger: logger.With("component", "cluster")}
	h := &clusterHandler{}
	mgr, err := NewManager(ManagerConfig{
		Identity: Identity{Cluster: cl.Name, Node: id, Secret: secret}, Priority: cl.Priority,
		Partitions: partitions, Listen: cl.Listen, Advertise: cl.Advertise, Peers: cl.Peers, HeartbeatInterval: cl.HeartbeatInterval,
		FailureTimeout: cl.FailureTimeout, Logger: c.logger,
	}, h)
	if err != nil {
		return nil, err
	}
	c.link = newPeerLink(mgr, c.logger)
	ec := election.DefaultConfig(election.NodeID(id))
	ec.Priority = cl.Priority
	el, err := NewElector(ElectorConfig{Election: ec, DataDir: cfg.DataDir, Logger: c.logger}, mgr, c.link)
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
	el   *Elector
	link *peerLink
}

func (h *clusterHandler) PeerUp(n string, p PeerInfo) {
	h.el.PeerUp(n, p.Priority)
	h.link.PeerUp(n, p)
}

func (h *clusterHandler) PeerDown(n string) {
	h.el.PeerDown(n)
	h.link.PeerDown(n)
}

func (h *clusterHandler) Frame(n string, f Frame) {
	if f.Type == TypeElection {
		h.el.Frame(n, f)
		return
	}
	h.link.Frame(n, f)
}

// Attach gives the data path the node's registry.
func (c *Node) Attach(reg *groups.Registry) {
	c.link.reg = reg
}

// Peers is what the node's registry uses to reach the other nodes.
func (c *Node) Peers() groups.Peers { return c.link }

// AddGroup elects a leader for a queue group (after the startup grace).
func (c *Node) AddGroup(key groups.GroupKey) {
	c.link.removed.clear(key.String()) // made anew here after a delete
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

func (c *Node) addElection(name string) {
	if err := c.elector.AddGroup(name); err != nil && !errors.Is(err, election.ErrGroupExists) {
		c.logger.Warn("election group", "group", name, "err", err)
	}
}

func (c *Node) Start(ctx context.Context, bg func(func())) error {
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
func (c *Node) feedDiscovered(ctx context.Context) {
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
func (c *Node) awaitPeers(ctx context.Context) {
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
func (c *Node) settled() bool {
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

// Stop says goodbye on mDNS; the peer connections end with Start's context.
func (c *Node) Stop() {
	if c.resp != nil {
		if err := c.resp.Stop(); err != nil { // says goodbye
			c.logger.Warn("mdns responder stop", "err", err)
		}
	}
}

// Snapshot copies the cluster's state for /metrics and /v1/status: the
// peer connections and the manager's counters, the leaders of groups and
// the election's counters (under one hold of the elector's lock), and which
// groups this node leads.
func (c *Node) Snapshot(gs []groups.GroupStats) *Stats {
	cs := &Stats{Name: c.cfg.Name, Listen: c.mgr.Addr(), Peers: c.mgr.Peers(),
		Unreachable: c.mgr.Unreachable(), Manager: c.mgr.Counters(), FencedRequests: c.link.fencedReqs.Load(),
		Leaders: make(map[groups.GroupKey]Leader, len(gs))}
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Key.String()
	}
	var leaders []GroupLeader
	leaders, cs.Election = c.elector.Leaders(names)
	c.link.mu.Lock()
	for _, l := range leaders {
		_, self := c.link.leading[l.Group]
		cs.Leaders[groupKey(l.Group)] = Leader{Node: l.Leader, Epoch: l.Epoch, Self: self}
	}
	c.link.mu.Unlock()
	return cs
}

// Stats is the cluster part of a metrics snapshot: peer connections, the
// election, and the counters of the data path between nodes that are not
// in Dispatch (forwards, relayed acks and remote commits are).
type Stats struct {
	Name   string // the cluster's name
	Listen string // this node's peer listener
	// Peers are the connected peers, sorted by node; Unreachable the
	// addresses to dial without a connection, sorted by address.
	Peers       []PeerStatus
	Unreachable []AddrStatus
	Manager     Counters
	Election    election.Stats
	// FencedRequests counts fetches and commits of other nodes' leaders
	// this node refused as a partition owner (stale epoch, or the epochs
	// could not be persisted).
	FencedRequests uint64
	// Leaders are the elected leaders of Groups (a group without one is
	// being elected).
	Leaders map[groups.GroupKey]Leader
}

// Leader is a queue group's elected leader.
type Leader struct {
	Node  string
	Epoch election.Epoch
	// Self: this node was elected and has not finished stepping down.
	Self bool
}

// DownPeers are the nodes that unreachable addresses led to and that have
// no connection, sorted and without repeats.
func (c *Stats) DownPeers() []string {
	var out []string
	for _, a := range c.Unreachable {
		if a.Node == "" || slices.Contains(out, a.Node) {
			continue
		}
		if _, up := slices.BinarySearchFunc(c.Peers, a.Node, func(p PeerStatus, n string) int { return strings.Compare(p.Node, n) }); !up {
			out = append(out, a.Node)
		}
	}
	slices.Sort(out)
	return out
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
