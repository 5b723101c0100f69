package jsapi

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
)

// DefaultInactiveThreshold is how long an ephemeral consumer without
// activity lives when its config sets no inactive_threshold (nats-server's
// default).
const DefaultInactiveThreshold = 5 * time.Second

// More JetStream error codes of consumers (nats-server's numbers).
const (
	CodeConsumerExists   = 10148
	CodeConsumerNotExist = 10149
	CodeInvalidPolicy    = 10094
	CodeConsumerInUse    = 10003 // edgeq: the group has members of other front ends
)

// plan is a consumer's validated, normalized configuration and what its
// queue group is made of.
type plan struct {
	cc    jetstream.ConsumerConfig
	core  groups.CoreConfig
	key   groups.GroupKey
	start func(partition int) uint64 // nil: core.Deliver
}

// createConsumer declares the consumer's queue group: the group
// (<filter>, <name>) is the same one a core `SUB <filter> <name>` joins.
// durable is true for $JS.API.CONSUMER.DURABLE.CREATE; otherwise a
// consumer without a durable name is ephemeral.
func (s *Service) createConsumer(stream, name string, body []byte, durable bool, owner uint64) ([]byte, *APIError) {
	v, ok := s.view(stream)
	if !ok {
		return nil, errStreamNotFound
	}
	var req struct {
		Stream string          `json:"stream_name"`
		Config json.RawMessage `json:"config"`
		Action string          `json:"action"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, Err(400, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	if len(req.Config) == 0 {
		return nil, Err(400, CodeBadRequest, "consumer config missing")
	}
	var raw struct {
		AckPolicy *string `json:"ack_policy"`
	}
	var cc jetstream.ConsumerConfig
	if err := json.Unmarshal(req.Config, &cc); err != nil {
		return nil, Err(400, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	_ = json.Unmarshal(req.Config, &raw)
	ackNone := raw.AckPolicy != nil && *raw.AckPolicy == "none"
	if raw.AckPolicy != nil && *raw.AckPolicy != "explicit" && !ackNone {
		return nil, Err(400, CodeConsumerCreate, "edgeq: ack_policy %q is not supported: \"explicit\" (a queue group) or \"none\" (an ordered read of the log)", *raw.AckPolicy)
	}
	if v.kv && !ackNone {
		return nil, Err(400, CodeConsumerCreate, "edgeq: KV bucket %q is a read-only view: only ordered consumers (ack_policy none: watch, history) read it", s.cfg.KVBucket)
	}
	ephemeral := !durable && cc.Durable == ""
	if name == "" {
		name = firstSet(cc.Durable, cc.Name)
	}
	if name == "" && ephemeral {
		name = ephemeralName()
	}
	if !ValidName(name) || cc.Durable != "" && cc.Durable != name || cc.Name != "" && cc.Name != name {
		return nil, Err(400, CodeConsumerCreate, "consumer name %q invalid or not the one in the subject", name)
	}
	cc.Name = name
	if !ephemeral {
		cc.Durable = name
	}
	if ackNone {
		if req.Action == "update" {
			return nil, Err(404, CodeConsumerNotExist, "consumer does not exist")
		}
		return s.createOrdered(v, cc, ephemeral, owner)
	}
	s.ordered.mu.Lock()
	_, taken := s.ordered.m[name]
	s.ordered.mu.Unlock()
	if taken {
		return nil, Err(400, CodeConsumerExists, "consumer already exists (an ordered consumer)")
	}
	p, e := s.plan(cc, ephemeral)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.consumers[name]; ok {
		if req.Action == "create" && old.Config.FilterSubject != p.cc.FilterSubject {
			return nil, Err(400, CodeConsumerExists, "consumer already exists")
		}
		if old.Key != p.key {
			return nil, Err(400, CodeConsumerCreate, "edgeq: a consumer's filter_subject cannot change")
		}
		old.active = s.now()
		return marshal("consumer_create_response", s.info(old)), nil
	}
	if req.Action == "update" {
		return nil, Err(404, CodeConsumerNotExist, "consumer does not exist")
	}
	if len(s.consumers) >= s.cfg.MaxConsumers {
		return nil, Err(400, CodeMaxConsumers, "maximum consumers limit reached (%d)", s.cfg.MaxConsumers)
	}
	c := &Consumer{Name: name, Config: p.cc, Key: p.key, Created: s.now().UTC(), Ephemeral: ephemeral}
	if err := s.reg.Declare(groups.GroupConfig{Key: p.key, Core: p.core, Start: p.start}); err != nil {
		return nil, Err(500, CodeConsumerCreate, "create consumer %s: %v", name, err)
	}
	s.consumers[name] = c
	if err := s.saveLocked(); err != nil {
		delete(s.consumers, name)
		if rerr := s.reg.Remove(p.key, s.hooks.Owned); rerr != nil && !s.cfg.Clustered {
			s.logger.Warn("consumer not kept: its queue group stays", "consumer", name, "err", rerr)
		}
		return nil, Err(500, CodeConsumerCreate, "create consumer %s: %v", name, err)
	}
	c.active = s.now()
	if s.hooks.Created != nil {
		s.hooks.Created(c)
	}
	return marshal("consumer_create_response", s.info(c)), nil
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ephemeralName names an ephemeral consumer created without one (the
// legacy CONSUMER.CREATE.<stream> form), as nats-server does: 8 random
// letters and digits.
func ephemeralName() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// plan checks cc (name already set) and derives the consumer's queue group.
// It is also what a restored consumer goes through again.
func (s *Service) plan(cc jetstream.ConsumerConfig, ephemeral bool) (plan, *APIError) {
	cc.AckPolicy = jetstream.AckExplicitPolicy
	if cc.DeliverSubject != "" && (strings.ContainsAny(cc.DeliverSubject, "*> \t") || strings.HasPrefix(cc.DeliverSubject, s.cfg.Prefix+".")) {
		return plan{}, Err(400, CodeConsumerCreate, "deliver_subject %q invalid (no wildcards, not within the stream)", cc.DeliverSubject)
	}
	if cc.FlowControl || cc.IdleHeartbeat > 0 {
		return plan{}, Err(400, CodeConsumerCreate, "edgeq: flow_control and idle_heartbeat of push consumers are not supported")
	}
	if len(cc.FilterSubjects) > 0 {
		return plan{}, Err(400, CodeConsumerCreate, "edgeq: filter_subjects is not supported; use filter_subject")
	}
	filter := s.cfg.Prefix + ".>"
	if cc.FilterSubject != "" {
		if !groups.IsTelemetryFilter(cc.FilterSubject, s.cfg.Prefix) {
			return plan{}, Err(400, CodeConsumerCreate, "filter_subject %q is not within the stream's subjects %s.>", cc.FilterSubject, s.cfg.Prefix)
		}
		filter = cc.FilterSubject
	}
	if cc.InactiveThreshold < 0 {
		return plan{}, Err(400, CodeConsumerCreate, "inactive_threshold %v must not be negative", cc.InactiveThreshold)
	}
	if ephemeral && cc.InactiveThreshold == 0 {
		cc.InactiveThreshold = DefaultInactiveThreshold
	}
	if cc.InactiveThreshold > 0 && s.cfg.Clustered {
		what := "ephemeral consumers are"
		if !ephemeral {
			what = "inactive_threshold is"
		}
		return plan{}, Err(400, CodeConsumerCreate, "edgeq: %s not supported in a cluster (a queue group lives on every node); create a durable consumer", what)
	}
	p := plan{core: s.cfg.Defaults}
	if e := s.planStart(&cc, &p); e != nil {
		return plan{}, e
	}
	if cc.AckWait > 0 {
		p.core.AckWait = cc.AckWait
	}
	cc.AckWait = p.core.AckWait
	if cc.MaxDeliver > 0 {
		p.core.MaxDeliver = cc.MaxDeliver
	}
	cc.MaxDeliver = p.core.MaxDeliver
	if cc.MaxAckPending > 0 {
		p.core.MaxInFlight = cc.MaxAckPending
	}
	cc.MaxAckPending = p.core.MaxInFlight
	if cc.MaxRequestBatch <= 0 || cc.MaxRequestBatch > MaxRequestBatch {
		cc.MaxRequestBatch = MaxRequestBatch
	}
	cc.Replicas = 1
	p.cc, p.key = cc, groups.GroupKey{Filter: filter, Queue: cc.Name}
	return p, nil
}

// planStart sets where a new consumer's group starts: deliver_policy all,
// new, by_start_sequence (opt_start_seq) or by_start_time (opt_start_time).
func (s *Service) planStart(cc *jetstream.ConsumerConfig, p *plan) *APIError {
	switch cc.DeliverPolicy {
	case jetstream.DeliverByStartSequencePolicy:
		if cc.OptStartSeq == 0 || cc.OptStartTime != nil {
			return Err(400, CodeInvalidPolicy, "consumer deliver policy by_start_sequence needs opt_start_seq (> 0) and no opt_start_time")
		}
	case jetstream.DeliverByStartTimePolicy:
		if cc.OptStartTime == nil || cc.OptStartSeq != 0 {
			return Err(400, CodeInvalidPolicy, "consumer deliver policy by_start_time needs opt_start_time (RFC 3339) and no opt_start_seq")
		}
	default:
		if cc.OptStartSeq != 0 || cc.OptStartTime != nil {
			return Err(400, CodeInvalidPolicy, "opt_start_seq and opt_start_time need deliver_policy by_start_sequence or by_start_time")
		}
	}
	switch cc.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		p.core.Deliver = groups.DeliverAll
	case jetstream.DeliverNewPolicy:
		p.core.Deliver = groups.DeliverNew
	case jetstream.DeliverByStartSequencePolicy:
		p.core.Deliver = groups.DeliverAll
		p.start = StartBySeq(cc.OptStartSeq)
	case jetstream.DeliverByStartTimePolicy:
		p.core.Deliver = groups.DeliverAll
		p.start = StartByTime(s.log, *cc.OptStartTime)
	default:
		return Err(400, CodeInvalidPolicy, "edgeq: deliver_policy %v is not supported (all, new, by_start_sequence, by_start_time)", cc.DeliverPolicy)
	}
	return nil
}

// Lookup returns consumer name of stream.
func (s *Service) Lookup(stream, name string) (*Consumer, *APIError) {
	if stream != s.cfg.Stream {
		return nil, errStreamNotFound
	}
	s.mu.Lock()
	c := s.consumers[name]
	s.mu.Unlock()
	if c == nil {
		return nil, errConsumerNotFound
	}
	return c, nil
}

func (s *Service) consumerNames(stream string) []string {
	names := []string{}
	if stream == s.cfg.Stream {
		s.mu.Lock()
		for n := range s.consumers {
			names = append(names, n)
		}
		s.mu.Unlock()
	}
	s.ordered.mu.Lock()
	for n, o := range s.ordered.m {
		if o.view.name == stream {
			names = append(names, n)
		}
	}
	s.ordered.mu.Unlock()
	sort.Strings(names)
	return names
}

func (s *Service) consumerInfo(stream, name string) (jetstream.ConsumerInfo, bool) {
	if o := s.Ordered(stream, name); o != nil {
		return o.info(), true
	}
	if stream != s.cfg.Stream {
		return jetstream.ConsumerInfo{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumers[name]
	if c == nil {
		return jetstream.ConsumerInfo{}, false
	}
	return s.info(c), true
}

// info is c's state from its group's statistics. Called with mu.
func (s *Service) info(c *Consumer) jetstream.ConsumerInfo {
	ci := jetstream.ConsumerInfo{Stream: s.cfg.Stream, Name: c.Name, Created: c.Created, Config: c.Config, TimeStamp: s.now().UTC()}
	for _, gs := range s.reg.Stats() {
		if gs.Key != c.Key {
			continue
		}
		ci.NumAckPending = gs.Core.InFlight
		ci.NumPending = uint64(gs.Core.Pending)
		ci.Delivered.Consumer = gs.Core.Delivered
		ci.AckFloor.Consumer = gs.Core.Acked + gs.Core.Terms
	}
	if s.hooks.Waiting != nil {
		ci.NumWaiting = s.hooks.Waiting(c)
	}
	return ci
}

// deleteConsumer removes the consumer and, on a standalone node, its queue
// group (runner, offsets): refused while members of other front ends (core
// NATS, NSQ, an uplink) share the group. In a cluster the name goes, then
// the group through Config.DeleteGroup on every node where nothing else
// holds it (without DeleteGroup it stays, with its offsets, until the node
// restarts).
func (s *Service) deleteConsumer(name string) *APIError {
	s.mu.Lock()
	c := s.consumers[name]
	if c == nil {
		s.mu.Unlock()
		return errConsumerNotFound
	}
	if e := s.removeGroupLocked(c); e != nil {
		s.mu.Unlock()
		return e
	}
	delete(s.consumers, name)
	err := s.saveLocked()
	s.mu.Unlock()
	s.Deleted.Add(1)
	s.logger.Info("consumer deleted", "consumer", name)
	if s.hooks.Deleted != nil {
		s.hooks.Deleted(c)
	}
	if s.cfg.Clustered && s.cfg.DeleteGroup != nil {
		// Its members here are gone (Deleted): the group goes on every
		// node, unless others hold it (said in the log; `edgeq groups rm`
		// deletes it later).
		if gerr := s.cfg.DeleteGroup(c.Key); gerr != nil && !errors.Is(gerr, ErrGroupNotFound) {
			s.logger.Warn("consumer deleted, its queue group stays", "consumer", name, "err", gerr)
		}
	}
	if err != nil {
		return Err(500, CodeConsumerCreate, "consumer %s deleted, but it may be back after a restart: %v", name, err)
	}
	return nil
}

// removeGroupLocked removes c's queue group unless the node is in a
// cluster. Called with mu.
func (s *Service) removeGroupLocked(c *Consumer) *APIError {
	if s.cfg.Clustered {
		return nil
	}
	err := s.reg.Remove(c.Key, s.hooks.Owned)
	switch {
	case err == nil, errors.Is(err, groups.ErrUnknownGroup):
		return nil
	case errors.Is(err, groups.ErrGroupShared):
		return Err(409, CodeConsumerInUse, "edgeq: consumer %s is a queue group that other subscribers share (core NATS, NSQ or an uplink): %v", c.Name, err)
	}
	return Err(500, CodeBadRequest, "delete consumer %s: %v", c.Name, err)
}

// ConsumerOf names the consumer whose queue group is key.
func (s *Service) ConsumerOf(key groups.GroupKey) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.consumers {
		if c.Key == key {
			return name, true
		}
	}
	return "", false
}

// Delete deletes consumer name as CONSUMER.DELETE does (the node's groups
// API uses it for a consumer's group).
func (s *Service) Delete(name string) *APIError { return s.deleteConsumer(name) }
