package natsserver

import (
	"math/rand/v2"
	"sync"

	"edgeq/gateway/subject"
)

// sublist holds core (not stored) subscriptions. Literal filters are found
// by map lookup, wildcard ones by a scan; an edge gateway has few of them.
// Bounded by connections × max_subscriptions.
type sublist struct {
	mu       sync.RWMutex
	literal  map[string]map[*sub]struct{}
	wildcard map[*sub]struct{}
}

func newSublist() *sublist {
	return &sublist{literal: map[string]map[*sub]struct{}{}, wildcard: map[*sub]struct{}{}}
}

func hasWildcard(filter string) bool {
	for i := 0; i < len(filter); i++ {
		if (filter[i] == '*' || filter[i] == '>') && (i == 0 || filter[i-1] == '.') &&
			(i == len(filter)-1 || filter[i+1] == '.') {
			return true
		}
	}
	return false
}

func (l *sublist) add(s *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hasWildcard(s.filter) {
		l.wildcard[s] = struct{}{}
		return
	}
	m := l.literal[s.filter]
	if m == nil {
		m = map[*sub]struct{}{}
		l.literal[s.filter] = m
	}
	m[s] = struct{}{}
}

func (l *sublist) remove(s *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.wildcard, s)
	if m := l.literal[s.filter]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(l.literal, s.filter)
		}
	}
}

// match calls deliver for every plain subscription matching subj and for
// one member of each core queue group (random, retrying another member when
// one refuses). deliver reports whether the message was taken. It runs
// outside the lock, so deliver may close connections.
func (l *sublist) match(subj string, deliver func(*sub) bool) (matched int) {
	var plain []*sub
	var queues map[string][]*sub
	visit := func(s *sub) {
		if s.queue == "" {
			plain = append(plain, s)
			return
		}
		if queues == nil {
			queues = map[string][]*sub{}
		}
		queues[s.queue] = append(queues[s.queue], s)
	}
	l.mu.RLock()
	for s := range l.literal[subj] {
		visit(s)
	}
	for s := range l.wildcard {
		if subject.Match(s.filter, subj) {
			visit(s)
		}
	}
	l.mu.RUnlock()
	for _, s := range plain {
		deliver(s)
	}
	matched = len(plain) + len(queues)
	for _, members := range queues {
		for len(members) > 0 {
			i := rand.IntN(len(members))
			if deliver(members[i]) {
				break
			}
			members[i] = members[len(members)-1]
			members = members[:len(members)-1]
		}
	}
	return matched
}
