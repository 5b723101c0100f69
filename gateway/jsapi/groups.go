package jsapi

import (
	"errors"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
)

// Queue groups that are not JetStream consumers — core NATS queue
// subscribers, NSQ channels, uplinks — read from the same stream, so
// CONSUMER.NAMES, LIST and INFO show them as consumers named by their queue
// (when that is a valid consumer name that no consumer has), and
// CONSUMER.DELETE deletes them through Config.DeleteGroup (which refuses
// groups with members, in the configuration or of an uplink).

// GroupDescription marks a queue group shown as a consumer.
const GroupDescription = "edgeq queue group (core NATS, NSQ or uplink), not a JetStream consumer: delete it once it has no members"

// ErrGroupNotFound, returned by Config.DeleteGroup, answers 404.
var ErrGroupNotFound = errors.New("jsapi: no such queue group")

// queueGroups are the groups shown as consumers, by name; sorted names.
func (s *Service) queueGroups() (map[string]groups.GroupStats, []string) {
	gs := s.reg.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	byName := map[string]groups.GroupStats{}
	dup := map[string]bool{}
	for _, g := range gs {
		name := g.Key.Queue
		if !ValidName(name) || s.consumers[name] != nil || s.keyIsConsumerLocked(g.Key) {
			continue
		}
		if _, ok := byName[name]; ok {
			dup[name] = true // one name, several filters: not one consumer
			continue
		}
		byName[name] = g
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		if dup[n] {
			delete(byName, n)
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return byName, names
}

func (s *Service) keyIsConsumerLocked(k groups.GroupKey) bool {
	for _, c := range s.consumers {
		if c.Key == k {
			return true
		}
	}
	return false
}

// groupInfo shows a queue group as a consumer.
func (s *Service) groupInfo(g groups.GroupStats) jetstream.ConsumerInfo {
	cc := jetstream.ConsumerConfig{Name: g.Key.Queue, Description: GroupDescription, FilterSubject: g.Key.Filter,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.cfg.Defaults.AckWait, MaxDeliver: s.cfg.Defaults.MaxDeliver,
		MaxAckPending: s.cfg.Defaults.MaxInFlight, Replicas: 1}
	if g.Declared {
		cc.Durable = g.Key.Queue
	}
	if s.cfg.Defaults.Deliver == groups.DeliverNew {
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	ci := jetstream.ConsumerInfo{Stream: s.cfg.Stream, Name: g.Key.Queue, Config: cc, TimeStamp: s.now().UTC(),
		NumAckPending: g.Core.InFlight, NumPending: uint64(g.Core.Pending)}
	ci.Delivered.Consumer = g.Core.Delivered
	ci.AckFloor.Consumer = g.Core.Acked + g.Core.Terms
	return ci
}

// allConsumerNames are a stream's consumers' names and, on the node's
// stream, the groups shown as consumers.
func (s *Service) allConsumerNames(stream string) []string {
	names := s.consumerNames(stream)
	if stream != s.cfg.Stream {
		return names
	}
	_, gnames := s.queueGroups()
	names = append(names, gnames...)
	sort.Strings(names)
	return names
}

// anyConsumerInfo is a consumer's info, or on the node's stream a group's
// shown as one.
func (s *Service) anyConsumerInfo(stream, name string) (jetstream.ConsumerInfo, bool) {
	if ci, ok := s.consumerInfo(stream, name); ok {
		return ci, true
	}
	if stream != s.cfg.Stream {
		return jetstream.ConsumerInfo{}, false
	}
	byName, _ := s.queueGroups()
	g, ok := byName[name]
	if !ok {
		return jetstream.ConsumerInfo{}, false
	}
	return s.groupInfo(g), true
}

// deleteAny deletes a consumer or, for a group shown as one, the group.
func (s *Service) deleteAny(name string) *APIError {
	e := s.deleteConsumer(name)
	if e != errConsumerNotFound || s.cfg.DeleteGroup == nil {
		return e
	}
	byName, _ := s.queueGroups()
	g, ok := byName[name]
	if !ok {
		return e
	}
	if err := s.cfg.DeleteGroup(g.Key); err != nil {
		if errors.Is(err, ErrGroupNotFound) {
			return errConsumerNotFound
		}
		return Err(409, CodeConsumerInUse, "edgeq: %v", err)
	}
	s.Deleted.Add(1)
	return nil
}
