package apiv1

import "time"

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

// GroupList is the answer to GET /v1/groups.
type GroupList struct {
	Groups []GroupInfo `json:"groups"`
}

// GroupDeleted is the answer to DELETE /v1/groups/{name}.
type GroupDeleted struct {
	Deleted GroupInfo `json:"deleted"`
}
