package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"edgeq/gateway/cluster"
	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/nsqserver"
)

// GroupInfo is one queue group in GET /v1/groups: a core NATS queue group,
// an NSQ channel (the same groups: subject <prefix>.>), a JetStream
// consumer or an uplink.
type GroupInfo struct {
	Name    string `json:"name"`    // the queue name (NSQ channel, consumer name, uplink:<name>)
	Subject string `json:"subject"` // the subject filter
	// Kind: "queue" (core NATS queue subscribers, NSQ consumers),
	// "jetstream" (a consumer of the stream) or "uplink".
	Kind string `json:"kind"`
	// NSQChannel: a channel of the NSQ topic <prefix> (subject <prefix>.>).
	NSQChannel bool `json:"nsq_channel"`
	// Declared says where the group is declared, so that it never expires:
	// "groups[i]" or "uplinks[i]" in the configuration, "jetstream" (a
	// durable consumer), "peer" (another node's configuration), "here" (an
	// uplink or consumer removed since); empty for a group made by its
	// subscribers.
	Declared string         `json:"declared,omitempty"`
	Members  map[string]int `json:"members"` // by node
	Leader   string         `json:"leader,omitempty"`
	Pending  int            `json:"pending"`   // read ahead, not yet delivered (on its leader)
	InFlight int            `json:"in_flight"` // delivered, unanswered (on its leader)
	// Expires is when an undeclared group without members goes
	// (queue.group_ttl after its last member left).
	Expires *time.Time `json:"expires,omitempty"`
}

// Groups lists the node's queue groups.
func (n *Node) Groups() []GroupInfo {
	gs := n.queues.Stats()
	leaders := map[groups.GroupKey]string{}
	if n.cluster != nil {
		for k, l := range n.cluster.Snapshot(gs).Leaders {
			leaders[k] = l.Node
		}
	}
	out := make([]GroupInfo, 0, len(gs))
	for _, g := range gs {
		gi := GroupInfo{Name: g.Key.Queue, Subject: g.Key.Filter, Kind: "queue", Members: g.Members,
			NSQChannel: g.Key.Filter == n.cfg.NATS.TelemetryPrefix+".>", Leader: leaders[g.Key],
			Pending: g.Core.Pending, InFlight: g.Core.InFlight}
		if n.cluster == nil {
			gi.Leader = n.id
		}
		switch where, kind := n.groupOrigin(g.Key); {
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
			at := g.EmptySince.Add(n.cfg.Queue.GroupTTL).UTC().Truncate(time.Second)
			gi.Expires = &at
		}
		out = append(out, gi)
	}
	return out
}

// groupOrigin says where key is declared on this node ("groups[i]",
// "uplinks[i]", "jetstream") and, for an uplink's or a consumer's group,
// its kind.
func (n *Node) groupOrigin(key groups.GroupKey) (where, kind string) {
	n.bridgesMu.RLock()
	for i, r := range n.uplinks {
		if r.key == key {
			n.bridgesMu.RUnlock()
			return fmt.Sprintf("uplinks[%d]", i), "uplink"
		}
	}
	n.bridgesMu.RUnlock()
	if n.js != nil {
		if _, ok := n.js.ConsumerOf(key); ok {
			return "jetstream", "jetstream"
		}
	}
	for i, g := range n.cfg.Groups {
		if g.Subject == key.Filter && g.Queue == key.Queue {
			return fmt.Sprintf("groups[%d]", i), ""
		}
	}
	return "", ""
}

// Errors of DeleteGroup; each message says what to do instead.
var (
	ErrGroupNotFound   = errors.New("no such queue group")
	ErrGroupAmbiguous  = errors.New("several queue groups have that name")
	ErrGroupConfigured = errors.New("queue group declared in the configuration")
	ErrGroupHasMembers = errors.New("queue group has members")
	ErrGroupClustered  = errors.New("queue group of a cluster")
)

// DeleteGroup deletes the queue group named name (subject: its filter,
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
func (n *Node) DeleteGroup(name, subject string) (GroupInfo, error) {
	var found []GroupInfo
	for _, g := range n.Groups() {
		if g.Name == name && (subject == "" || g.Subject == subject) {
			found = append(found, g)
		}
	}
	switch {
	case len(found) == 0 && subject != "":
		return GroupInfo{}, fmt.Errorf("%w: %q with subject %q", ErrGroupNotFound, name, subject)
	case len(found) == 0:
		return GroupInfo{}, fmt.Errorf("%w: %q", ErrGroupNotFound, name)
	case len(found) > 1:
		subs := make([]string, len(found))
		for i, g := range found {
			subs[i] = g.Subject
		}
		return GroupInfo{}, fmt.Errorf("%w: %q on subjects %s: say which with ?subject= (edgeq groups rm --subject)", ErrGroupAmbiguous, name, strings.Join(subs, ", "))
	}
	g := found[0]
	key := groups.GroupKey{Filter: g.Subject, Queue: g.Name}
	switch {
	case g.Kind == "uplink":
		return g, fmt.Errorf("%w: %q is the group of the uplink in %s: remove the uplink there (a reload stops it), then delete the group", ErrGroupConfigured, name, g.Declared)
	case strings.HasPrefix(g.Declared, "groups["):
		return g, fmt.Errorf("%w: %q is declared in %s: remove it there and restart (a declared group is made again at start)", ErrGroupConfigured, name, g.Declared)
	case g.Kind == "jetstream":
		cname, _ := n.js.ConsumerOf(key)
		if e := n.js.Delete(cname); e != nil {
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
	return g, n.deleteQueueGroup(key, g.Members)
}

// deleteQueueGroup removes a group that is neither an uplink's, a
// consumer's nor in the configuration.
func (n *Node) deleteQueueGroup(key groups.GroupKey, members map[string]int) error {
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
	if n.cluster != nil {
		err = n.cluster.RemoveGroup(key)
	} else {
		err = n.queues.Remove(key, nil)
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

// deleteGroupOfKey is DeleteGroup for the JetStream API's CONSUMER.DELETE
// of a queue group shown as a consumer.
func (n *Node) deleteGroupOfKey(key groups.GroupKey) error {
	_, err := n.DeleteGroup(key.Queue, key.Filter)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("%w: %v", jsapi.ErrGroupNotFound, err)
	}
	return err
}

// deleteChannel is DeleteGroup for nsqd's POST /channel/delete.
func (n *Node) deleteChannel(filter, channel string) error {
	_, err := n.DeleteGroup(channel, filter)
	if errors.Is(err, ErrGroupNotFound) {
		return fmt.Errorf("%w: %v", nsqserver.ErrChannelNotFound, err)
	}
	return err
}

// handleGroups answers GET /v1/groups.
func (n *Node) handleGroups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"groups": n.Groups()})
}

// handleDeleteGroup answers DELETE /v1/groups/{name}[?subject=<filter>].
func (n *Node) handleDeleteGroup(w http.ResponseWriter, r *http.Request) {
	g, err := n.DeleteGroup(r.PathValue("name"), r.URL.Query().Get("subject"))
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
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": g})
}
