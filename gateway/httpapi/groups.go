package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/gateway/cluster"
	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/nsqserver"
)

// Registry is what the groups admin reads of the node's queue groups and
// removes from them.
type Registry interface {
	Stats() []groups.GroupStats
	Remove(key groups.GroupKey, owned func(groups.Member) bool) error
}

var _ Registry = (*groups.Registry)(nil)

// Cluster is the node's cluster as the groups admin uses it: who leads
// each group, and removing a group on every node.
type Cluster interface {
	Snapshot(gs []groups.GroupStats) *cluster.Stats
	RemoveGroup(key groups.GroupKey) error
}

var _ Cluster = (*cluster.Node)(nil)

// JetStream is the JetStream API's consumers, which are queue groups too.
type JetStream interface {
	ConsumerOf(key groups.GroupKey) (string, bool)
	Delete(name string) *jsapi.APIError
}

var _ JetStream = (*jsapi.Service)(nil)

// GroupsConfig is what the groups admin lists and deletes with.
type GroupsConfig struct {
	NodeID          string
	TelemetryPrefix string
	// GroupTTL is queue.group_ttl: when an undeclared group without
	// members expires.
	GroupTTL time.Duration
	// Declared are the groups of the configuration (groups:), in order.
	Declared []groups.GroupKey
	Registry Registry
	// Cluster is nil on a standalone node, JetStream nil when it is off.
	Cluster   Cluster
	JetStream JetStream
	// Uplinks are the uplinks' groups now, in the order of the node's list.
	Uplinks func() []groups.GroupKey
}

// Groups lists and deletes the node's queue groups: GET and DELETE
// /v1/groups, and the same deletion for the JetStream API and nsqd's
// /channel/delete.
type Groups struct {
	cfg GroupsConfig
}

// NewGroups builds the groups admin.
func NewGroups(cfg GroupsConfig) *Groups { return &Groups{cfg: cfg} }

// List lists the node's queue groups.
func (a *Groups) List() []apiv1.GroupInfo {
	gs := a.cfg.Registry.Stats()
	leaders := map[groups.GroupKey]string{}
	if a.cfg.Cluster != nil {
		for k, l := range a.cfg.Cluster.Snapshot(gs).Leaders {
			leaders[k] = l.Node
		}
	}
	var ups []groups.GroupKey
	if a.cfg.Uplinks != nil {
		ups = a.cfg.Uplinks()
	}
	out := make([]apiv1.GroupInfo, 0, len(gs))
	for _, g := range gs {
		gi := apiv1.GroupInfo{Name: g.Key.Queue, Subject: g.Key.Filter, Kind: "queue", Members: g.Members,
			NSQChannel: g.Key.Filter == a.cfg.TelemetryPrefix+".>", Leader: leaders[g.Key],
			Pending: g.Core.Pending, InFlight: g.Core.InFlight}
		if a.cfg.Cluster == nil {
			gi.Leader = a.cfg.NodeID
		}
		switch where, kind := a.origin(g.Key, ups); {
		case kind != "":
			gi.Kind, gi.Declared = kind, where
		case where != "":
			gi.Declared = where
		case g.Declared:
			gi.Declared = "here" // by an uplink or consumer removed since
		case g.DeclaredByPeer:
			gi.Declared = "peer"
		}
		if gi.Declared == "" && !g.EmptySince.IsZero() {
			at := g.EmptySince.Add(a.cfg.GroupTTL).UTC().Truncate(time.Second)
			gi.Expires = &at
		}
		out = append(out, gi)
	}
	return out
}

// channels lists the queues of the groups with filter: an NSQ topic's
// channels.
func (a *Groups) channels(filter string) []string {
	var out []string
	for _, g := range a.cfg.Registry.Stats() {
		if g.Key.Filter == filter {
			out = append(out, g.Key.Queue)
		}
	}
	return out
}

// origin says where key is declared on this node ("groups[i]",
// "uplinks[i]" of the uplinks' groups ups, "jetstream") and, for an
// uplink's or a consumer's group, its kind.
func (a *Groups) origin(key groups.GroupKey, ups []groups.GroupKey) (where, kind string) {
	for i, k := range ups {
		if k == key {
			return fmt.Sprintf("uplinks[%d]", i), "uplink"
		}
	}
	if a.cfg.JetStream != nil {
		if _, ok := a.cfg.JetStream.ConsumerOf(key); ok {
			return "jetstream", "jetstream"
		}
	}
	for i, g := range a.cfg.Declared {
		if g == key {
			return fmt.Sprintf("groups[%d]", i), ""
		}
	}
	return "", ""
}

// Errors of Groups.Delete; each message says what to do instead.
var (
	ErrGroupNotFound   = errors.New("no such queue group")
	ErrGroupAmbiguous  = errors.New("several queue groups have that name")
	ErrGroupConfigured = errors.New("queue group declared in the configuration")
	ErrGroupHasMembers = errors.New("queue group has members")
	ErrGroupClustered  = errors.New("queue group of a cluster")
)

// Delete deletes the queue group named name (subject: its filter,
// needed only when several groups share the name): its delivery stops and
// its position goes (it no longer holds back retention). A JetStream
// consumer's group is deleted as CONSUMER.DELETE does it.
//
// In a cluster the group goes on every node (refused while a peer is
// unreachable: it would bring the group back).
//
// A group with members is refused: a NATS, NSQ or uplink member stays
// subscribed whatever the node forgets, so it would either get nothing
// without being told, or bring the group back at once at deliver: new,
// skipping what arrived in between. Stop the workers, then delete. Groups
// declared in the configuration (groups:, uplinks:) are refused with the key
// to remove instead: a restart or reload would declare them again.
func (a *Groups) Delete(name, subject string) (apiv1.GroupInfo, error) {
	var found []apiv1.GroupInfo
	for _, g := range a.List() {
		if g.Name == name && (subject == "" || g.Subject == subject) {
			found = append(found, g)
		}
	}
	switch {
	case len(found) == 0 && subject != "":
		return apiv1.GroupInfo{}, fmt.Errorf("%w: %q with subject %q", ErrGroupNotFound, name, subject)
	case len(found) == 0:
		return apiv1.GroupInfo{}, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	case len(found) > 1:
		subs := make([]string, len(found))
		for i, g := range found {
			subs[i] = g.Subject
		}
		return apiv1.GroupInfo{}, fmt.Errorf("%w: %q on subjects %s: say which with ?subject= (edgeq groups rm --subject)", ErrGroupAmbiguous, name, strings.Join(subs, ", "))
	}
	g := found[0]
	key := groups.GroupKey{Filter: g.Subject, Queue: g.Name}
	switch {
	case g.Kind == "uplink":
		return g, fmt.Errorf("%w: %q is the group of the uplink in %s: remove the uplink there (a reload stops it), then delete the group", ErrGroupConfigured, name, g.Declared)
	case strings.HasPrefix(g.Declared, "groups["):
		return g, fmt.Errorf("%w: %q is declared in %s: remove it there and restart (a declared group is made again at start)", ErrGroupConfigured, name, g.Declared)
	case g.Kind == "jetstream":
		cname, _ := a.cfg.JetStream.ConsumerOf(key)
		if e := a.cfg.JetStream.Delete(cname); e != nil {
			err := fmt.Errorf("delete consumer %s: %s", cname, e.Description)
			switch e.Code {
			case http.StatusConflict:
				err = fmt.Errorf("%w: %v", ErrGroupHasMembers, err)
			case http.StatusNotFound:
				err = fmt.Errorf("%w: %v", ErrGroupNotFound, err)
			}
			return g, err
		}
		return g, nil
	}
	return g, a.deleteQueueGroup(key, g.Members)
}

// deleteQueueGroup removes a group that is neither an uplink's, a
// consumer's nor in the configuration.
func (a *Groups) deleteQueueGroup(key groups.GroupKey, members map[string]int) error {
	var with []string
	for node, c := range members {
		if c > 0 {
			with = append(with, fmt.Sprintf("%d on %s", c, node))
		}
	}
	if len(with) > 0 {
		sort.Strings(with)
		return fmt.Errorf("%w: %q has %s: stop its workers first (their subscriptions would stay, getting nothing)", ErrGroupHasMembers, key.Queue, strings.Join(with, ", "))
	}
	var err error
	if a.cfg.Cluster != nil {
		err = a.cfg.Cluster.RemoveGroup(key)
	} else {
		err = a.cfg.Registry.Remove(key, nil)
	}
	switch {
	case errors.Is(err, cluster.ErrPeerDown):
		return fmt.Errorf("%w: %v", ErrGroupClustered, err)
	case errors.Is(err, groups.ErrRemoveClustered):
		return fmt.Errorf("%w: %q: %v", ErrGroupClustered, key.Queue, err)
	case errors.Is(err, groups.ErrGroupShared):
		return fmt.Errorf("%w: %v", ErrGroupHasMembers, err)
	case errors.Is(err, groups.ErrUnknownGroup):
		return fmt.Errorf("%w: %q (gone meanwhile)", ErrGroupNotFound, key.Queue)
	}
	return err
}

// DeleteKey is Delete for the JetStream API's CONSUMER.DELETE of a queue
// group shown as a consumer (jsapi.Config.DeleteGroup).
func (a *Groups) DeleteKey(key groups.GroupKey) error {
	_, err := a.Delete(key.Queue, key.Filter)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("%w: %v", jsapi.ErrGroupNotFound, err)
	}
	return err
}

// DeleteChannel is Delete for nsqd's POST /channel/delete.
func (a *Groups) DeleteChannel(filter, channel string) error {
	_, err := a.Delete(channel, filter)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("%w: %v", nsqserver.ErrChannelNotFound, err)
	}
	return err
}

// handleGroups answers GET /v1/groups.
func (s *Server) handleGroups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, apiv1.GroupList{Groups: s.cfg.Groups.List()})
}

// handleDeleteGroup answers DELETE /v1/groups/{name}[?subject=<filter>].
func (s *Server) handleDeleteGroup(w http.ResponseWriter, r *http.Request) {
	g, err := s.cfg.Groups.Delete(r.PathValue("name"), r.URL.Query().Get("subject"))
	if err != nil {
		code := http.StatusConflict
		switch {
		case errors.Is(err, ErrGroupNotFound):
			code = http.StatusNotFound
		case errors.Is(err, ErrGroupClustered), errors.Is(err, ErrGroupHasMembers), errors.Is(err, ErrGroupConfigured),
			errors.Is(err, ErrGroupAmbiguous):
		default:
			code = http.StatusInternalServerError
		}
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, apiv1.GroupDeleted{Deleted: g})
}
