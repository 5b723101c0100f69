package mqttsession

import (
	"errors"
	"fmt"
)

// ErrTopicAlias: a PUBLISH with a topic alias of 0 or above the Topic
// Alias Maximum the server advertised, or an empty topic with an alias the
// connection never set (Topic Alias invalid, 0x94; the runner closes the
// connection with DISCONNECT 0x94).
var ErrTopicAlias = errors.New("mqttsession: topic alias invalid")

// InboundAliases resolves the topic aliases of a client's PUBLISHes on
// one connection (MQTT 5.0 section 3.3.2.3.4). Aliases do not outlive the
// connection. It holds at most max topics, each copied once when set, so
// its memory is bounded by max times the longest topic the server accepts.
type InboundAliases struct {
	max    uint16
	topics map[uint16][]byte
}

// NewInboundAliases accepts aliases 1..max (the Topic Alias Maximum the
// server sent in CONNACK; 0 accepts none).
func NewInboundAliases(max uint16) *InboundAliases {
	return &InboundAliases{max: max, topics: make(map[uint16][]byte)}
}

// Resolve returns the topic of a PUBLISH with topic and alias (0: none).
// A non-empty topic with an alias sets the alias (the topic is copied,
// since it points into the read buffer); an empty topic uses it.
func (a *InboundAliases) Resolve(topic []byte, alias uint16) ([]byte, error) {
	if alias == 0 {
		return topic, nil
	}
	if alias > a.max {
		return nil, fmt.Errorf("%w: %d, the maximum is %d", ErrTopicAlias, alias, a.max)
	}
	if len(topic) > 0 {
		if old, ok := a.topics[alias]; !ok || string(old) != string(topic) {
			a.topics[alias] = append(old[:0:0], topic...)
		}
		return topic, nil
	}
	t, ok := a.topics[alias]
	if !ok {
		return nil, fmt.Errorf("%w: %d was never set on this connection", ErrTopicAlias, alias)
	}
	return t, nil
}

// Len returns how many aliases are set.
func (a *InboundAliases) Len() int { return len(a.topics) }
