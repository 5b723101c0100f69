package jsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
	"edgeq/gateway/queue"
	"edgeq/wal"
)

// APIPrefix starts JetStream API subjects.
const APIPrefix = "$JS.API."

// MaxRequestBatch bounds a pull request's batch (nats-server's
// max_request_batch); larger ones get a 409.
const MaxRequestBatch = 4096

// Config configures the JetStream face of a node.
type Config struct {
	Stream          string // the node's one stream, e.g. TELEMETRY
	Prefix          string // telemetry prefix: the stream's subjects are <prefix>.>
	MaxConsumers    int
	DuplicateWindow time.Duration
	MaxBytes        int64 // the log's disk budget (stream max_bytes)
	MaxAge          time.Duration
	// Defaults is the core configuration a consumer's group starts from.
	Defaults queue.Config
}

// Registry is what the API needs of gateway/groups.
type Registry interface {
	Declare(gc groups.GroupConfig) error
	Stats() []groups.GroupStats
}

// Service answers the JetStream API for one node.
type Service struct {
	cfg     Config
	log     *wal.Log
	reg     Registry
	created time.Time
	now     func() time.Time

	mu        sync.Mutex
	consumers map[string]*Consumer // bound: cfg.MaxConsumers

	Total, Errors atomic.Uint64 // API calls, and those answered with an error

	onCreate func(*Consumer) // set once by SetHooks, before use
	onDelete func(name string)
}

// SetHooks tells the front end of consumers created and deleted (push
// consumers have a member of the server's own). Call before serving.
func (s *Service) SetHooks(created func(*Consumer), deleted func(name string)) {
	s.onCreate, s.onDelete = created, deleted
}

// Consumer is a JetStream consumer: a queue group with a name.
type Consumer struct {
	Name    string
	Config  jetstream.ConsumerConfig
	Key     groups.GroupKey
	Created time.Time
}

// NewService returns the API over l and reg.
func NewService(cfg Config, l *wal.Log, reg Registry) *Service {
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = 64
	}
	return &Service{cfg: cfg, log: l, reg: reg, created: time.Now().UTC(), now: time.Now, consumers: map[string]*Consumer{}}
}

// Consumers is the number of consumers.
func (s *Service) Consumers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumers)
}

// Stream is the stream's name.
func (s *Service) Stream() string { return s.cfg.Stream }

// APIError is a JetStream error answer.
type APIError = jetstream.APIError

// The JetStream error codes edgeq answers with (nats-server's numbers).
const (
	CodeBadRequest       = 10003
	CodeConsumerCreate   = 10012
	CodeConsumerNotFound = 10014
	CodeInvalidJSON      = 10025
	CodeMaxConsumers     = 10026
	CodeStreamNotFound   = 10059
	CodeStreamMismatch   = 10060
	CodeWrongLastMsgID   = 10070
	CodeWrongLastSeq     = 10071
	CodeFilterMismatch   = 10131 // JSConsumerCreateFilterSubjectMismatchErr
	CodeMultipleFilters  = 10137 // JSConsumerMultipleFiltersNotAllowed
	CodeNotSupported     = 10003
)

// Err builds an APIError.
func Err(status int, code jetstream.ErrorCode, format string, args ...any) *APIError {
	return &APIError{Code: status, ErrorCode: code, Description: fmt.Sprintf(format, args...)}
}

var (
	errStreamNotFound   = Err(404, CodeStreamNotFound, "stream not found")
	errConsumerNotFound = Err(404, CodeConsumerNotFound, "consumer not found")
)

type response struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

// ErrorJSON is the answer for e to an API call of kind typ.
func ErrorJSON(typ string, e *APIError) []byte {
	b, _ := json.Marshal(response{Type: "io.nats.jetstream.api.v1." + typ, Error: e})
	return b
}

// Handle answers one API call: api is the subject after $JS.API., body the
// request. Calls outside the subset get a JetStream error, never silence.
// CONSUMER.MSG.NEXT is the connection's business (see ParseNext).
func (s *Service) Handle(api string, body []byte) []byte {
	s.Total.Add(1)
	out, e := s.handle(api, body)
	if e != nil {
		s.Errors.Add(1)
		return ErrorJSON(typeOf(api), e)
	}
	return out
}

func typeOf(api string) string {
	t := strings.ToLower(api)
	if i := strings.IndexByte(t, '.'); i > 0 {
		if j := strings.IndexByte(t[i+1:], '.'); j > 0 {
			t = t[:i+1+j]
		}
	}
	return strings.ReplaceAll(t, ".", "_") + "_response"
}

func (s *Service) handle(api string, body []byte) ([]byte, *APIError) {
	tok := strings.Split(api, ".")
	switch {
	case api == "INFO":
		return s.accountInfo(), nil
	case api == "STREAM.NAMES":
		return marshal("stream_names_response", map[string]any{"total": 1, "offset": 0, "limit": 1024, "streams": []string{s.cfg.Stream}}), nil
	case api == "STREAM.LIST":
		return marshal("stream_list_response", map[string]any{"total": 1, "offset": 0, "limit": 256, "streams": []jetstream.StreamInfo{s.streamInfo()}}), nil
	case len(tok) == 3 && tok[0] == "STREAM" && tok[1] == "INFO":
		if tok[2] != s.cfg.Stream {
			return nil, errStreamNotFound
		}
		return marshal("stream_info_response", s.streamInfo()), nil
	case len(tok) == 3 && tok[0] == "CONSUMER" && (tok[1] == "NAMES" || tok[1] == "LIST"):
		if tok[2] != s.cfg.Stream {
			return nil, errStreamNotFound
		}
		if tok[1] == "NAMES" {
			names := s.consumerNames()
			return marshal("consumer_names_response", map[string]any{"total": len(names), "offset": 0, "limit": 1024, "consumers": names}), nil
		}
		infos := []jetstream.ConsumerInfo{}
		for _, n := range s.consumerNames() {
			if ci, ok := s.consumerInfo(n); ok {
				infos = append(infos, ci)
			}
		}
		return marshal("consumer_list_response", map[string]any{"total": len(infos), "offset": 0, "limit": 256, "consumers": infos}), nil
	case len(tok) >= 4 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		if e := checkCreateFilter(strings.Join(tok[4:], "."), body); e != nil {
			return nil, e
		}
		return s.createConsumer(tok[2], tok[3], body, false)
	case len(tok) == 3 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		return s.createConsumer(tok[2], "", body, false)
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "DURABLE" && tok[2] == "CREATE":
		return s.createConsumer(tok[3], tok[4], body, true)
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "INFO":
		if tok[2] != s.cfg.Stream {
			return nil, errStreamNotFound
		}
		ci, ok := s.consumerInfo(tok[3])
		if !ok {
			return nil, errConsumerNotFound
		}
		return marshal("consumer_info_response", ci), nil
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "DELETE":
		if tok[2] != s.cfg.Stream {
			return nil, errStreamNotFound
		}
		if !s.deleteConsumer(tok[3]) {
			return nil, errConsumerNotFound
		}
		return marshal("consumer_delete_response", map[string]any{"success": true}), nil
	case len(tok) >= 2 && tok[0] == "STREAM" && (tok[1] == "CREATE" || tok[1] == "UPDATE" || tok[1] == "DELETE" || tok[1] == "PURGE"):
		return nil, Err(400, CodeNotSupported, "edgeq: the stream is the node's log, set by its configuration (jetstream.stream); %s is not supported", strings.ToLower(tok[1]))
	}
	return nil, Err(400, CodeNotSupported, "edgeq: JetStream API %q is not supported (see README: JetStream)", api)
}

// checkCreateFilter checks the filter of $JS.API.CONSUMER.CREATE.<stream>.
// <consumer>.<filter> (which may hold wildcards: nats.go and nats.js send
// the consumer's filter_subject there) against the request's config, as
// nats-server does: it must equal filter_subject, and filter_subjects is
// refused. An empty filter (no such tokens) or a body that is not JSON is
// left to createConsumer.
func checkCreateFilter(filter string, body []byte) *APIError {
	if filter == "" {
		return nil
	}
	var req struct {
		Config struct {
			FilterSubject  string   `json:"filter_subject"`
			FilterSubjects []string `json:"filter_subjects"`
		} `json:"config"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	if len(req.Config.FilterSubjects) > 0 {
		return Err(400, CodeMultipleFilters, "consumer with multiple subject filters cannot use subject based API")
	}
	if req.Config.FilterSubject != filter {
		return Err(400, CodeFilterMismatch, "Consumer create request did not match filtered subject from create subject (%q, config %q)", filter, req.Config.FilterSubject)
	}
	return nil
}

func marshal(typ string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return ErrorJSON(typ, Err(500, CodeBadRequest, "encode: %v", err))
	}
	// Add the type field without a wrapper type per answer.
	t, _ := json.Marshal("io.nats.jetstream.api.v1." + typ)
	out := make([]byte, 0, len(b)+len(t)+10)
	out = append(out, `{"type":`...)
	out = append(out, t...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...)
}

func (s *Service) accountInfo() []byte {
	s.mu.Lock()
	nc := len(s.consumers)
	s.mu.Unlock()
	tier := jetstream.Tier{Store: uint64(max(s.log.TotalBytes(), 0)), Streams: 1, Consumers: nc,
		Limits: jetstream.AccountLimits{MaxMemory: 0, MaxStore: s.cfg.MaxBytes, MaxStreams: 1, MaxConsumers: s.cfg.MaxConsumers,
			MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: s.cfg.MaxBytes}}
	return marshal("account_info_response", jetstream.AccountInfo{Tier: tier,
		API: jetstream.APIStats{Level: 1, Total: s.Total.Load(), Errors: s.Errors.Load()}})
}

// streamInfo describes the log as a stream; first/last follow the stream
// sequence (offset-major), times are those of the records there.
func (s *Service) streamInfo() jetstream.StreamInfo {
	var st jetstream.StreamState
	firstSet := false
	for p := 0; p < s.log.NumPartitions(); p++ {
		first, last := s.log.First(p), s.log.Durable(p)
		if last < first {
			continue
		}
		st.Msgs += last - first + 1
		if q := StreamSeq(p, first); !firstSet || q < st.FirstSeq {
			st.FirstSeq, firstSet = q, true
			st.FirstTime = s.recordTime(p, first)
		}
		if q := StreamSeq(p, last); q > st.LastSeq {
			st.LastSeq = q
			st.LastTime = s.recordTime(p, last)
		}
	}
	st.Bytes = uint64(max(s.log.TotalBytes(), 0))
	s.mu.Lock()
	st.Consumers = len(s.consumers)
	s.mu.Unlock()
	return jetstream.StreamInfo{
		Config: jetstream.StreamConfig{Name: s.cfg.Stream, Subjects: []string{s.cfg.Prefix + ".>"}, Retention: jetstream.LimitsPolicy,
			MaxConsumers: s.cfg.MaxConsumers, MaxMsgs: -1, MaxBytes: s.cfg.MaxBytes, MaxAge: s.cfg.MaxAge, MaxMsgsPerSubject: -1,
			MaxMsgSize: -1, Discard: jetstream.DiscardOld, Storage: jetstream.FileStorage, Replicas: 1, Duplicates: s.cfg.DuplicateWindow,
			DenyDelete: true, DenyPurge: true},
		Created:   s.created,
		State:     st,
		TimeStamp: s.now().UTC(),
	}
}

func (s *Service) recordTime(p int, off uint64) time.Time {
	b, err := s.log.Read(p, off, 1, 1)
	if err != nil || len(b.Entries) == 0 {
		return time.Time{}
	}
	return time.Unix(0, b.Entries[0].Record.Time).UTC()
}

// createConsumer declares the consumer's queue group: the group
// (<filter>, <name>) is the same one a core `SUB <filter> <name>` joins.
func (s *Service) createConsumer(stream, name string, body []byte, durable bool) ([]byte, *APIError) {
	if stream != s.cfg.Stream {
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
	var raw struct {
		AckPolicy *string `json:"ack_policy"`
	}
	var cc jetstream.ConsumerConfig
	if len(req.Config) == 0 {
		return nil, Err(400, CodeBadRequest, "consumer config missing")
	}
	if err := json.Unmarshal(req.Config, &cc); err != nil {
		return nil, Err(400, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	_ = json.Unmarshal(req.Config, &raw)
	if raw.AckPolicy != nil && *raw.AckPolicy != "explicit" {
		return nil, Err(400, CodeConsumerCreate, "edgeq: ack_policy %q is not supported, only \"explicit\" (every message is acknowledged)", *raw.AckPolicy)
	}
	if name == "" {
		name = cc.Durable
	}
	if name == "" {
		name = cc.Name
	}
	if name == "" {
		return nil, Err(400, CodeConsumerCreate, "edgeq: consumers are durable: give a name (ephemeral consumers are not supported)")
	}
	if !ValidName(name) || cc.Durable != "" && cc.Durable != name || cc.Name != "" && cc.Name != name {
		return nil, Err(400, CodeConsumerCreate, "consumer name %q invalid or not the one in the subject", name)
	}
	cc.Name, cc.Durable, cc.AckPolicy = name, name, jetstream.AckExplicitPolicy
	if cc.DeliverSubject != "" && (strings.ContainsAny(cc.DeliverSubject, "*> \t") || strings.HasPrefix(cc.DeliverSubject, s.cfg.Prefix+".")) {
		return nil, Err(400, CodeConsumerCreate, "deliver_subject %q invalid (no wildcards, not within the stream)", cc.DeliverSubject)
	}
	if cc.FlowControl || cc.IdleHeartbeat > 0 {
		return nil, Err(400, CodeConsumerCreate, "edgeq: flow_control and idle_heartbeat of push consumers are not supported")
	}
	filter := s.cfg.Prefix + ".>"
	if len(cc.FilterSubjects) > 0 {
		return nil, Err(400, CodeConsumerCreate, "edgeq: filter_subjects is not supported; use filter_subject")
	}
	if cc.FilterSubject != "" {
		if !groups.IsTelemetryFilter(cc.FilterSubject, s.cfg.Prefix) {
			return nil, Err(400, CodeConsumerCreate, "filter_subject %q is not within the stream's subjects %s.>", cc.FilterSubject, s.cfg.Prefix)
		}
		filter = cc.FilterSubject
	}
	core := s.cfg.Defaults
	switch cc.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		core.Deliver = queue.DeliverAll
	case jetstream.DeliverNewPolicy:
		core.Deliver = queue.DeliverNew
	default:
		return nil, Err(400, CodeConsumerCreate, "edgeq: deliver_policy %v is not supported (all, new)", cc.DeliverPolicy)
	}
	if cc.AckWait > 0 {
		core.AckWait = cc.AckWait
	}
	cc.AckWait = core.AckWait
	if cc.MaxDeliver > 0 {
		core.MaxDeliver = cc.MaxDeliver
	}
	cc.MaxDeliver = core.MaxDeliver
	if cc.MaxAckPending > 0 {
		core.MaxInFlight = cc.MaxAckPending
	}
	cc.MaxAckPending = core.MaxInFlight
	if cc.MaxRequestBatch <= 0 || cc.MaxRequestBatch > MaxRequestBatch {
		cc.MaxRequestBatch = MaxRequestBatch
	}
	cc.Replicas = 1
	key := groups.GroupKey{Filter: filter, Queue: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.consumers[name]; ok {
		if req.Action == "create" && old.Config.FilterSubject != cc.FilterSubject {
			return nil, Err(400, 10148, "consumer already exists")
		}
		if old.Key != key {
			return nil, Err(400, CodeConsumerCreate, "edgeq: a consumer's filter_subject cannot change")
		}
		return marshal("consumer_create_response", s.info(old)), nil
	}
	if req.Action == "update" {
		return nil, Err(404, 10149, "consumer does not exist")
	}
	if len(s.consumers) >= s.cfg.MaxConsumers {
		return nil, Err(400, CodeMaxConsumers, "maximum consumers limit reached (%d)", s.cfg.MaxConsumers)
	}
	if err := s.reg.Declare(groups.GroupConfig{Key: key, Core: core}); err != nil {
		return nil, Err(500, CodeConsumerCreate, "create consumer %s: %v", name, err)
	}
	c := &Consumer{Name: name, Config: cc, Key: key, Created: s.now().UTC()}
	s.consumers[name] = c
	if s.onCreate != nil {
		s.onCreate(c)
	}
	return marshal("consumer_create_response", s.info(c)), nil
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

func (s *Service) consumerNames() []string {
	s.mu.Lock()
	names := make([]string, 0, len(s.consumers))
	for n := range s.consumers {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	return names
}

func (s *Service) consumerInfo(name string) (jetstream.ConsumerInfo, bool) {
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
	return ci
}

// deleteConsumer forgets the consumer. Its queue group stays declared
// (with its offsets) until the node restarts: edgeq's groups have no
// removal on demand yet.
func (s *Service) deleteConsumer(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.consumers[name]; !ok {
		return false
	}
	delete(s.consumers, name)
	if s.onDelete != nil {
		s.onDelete(name)
	}
	return true
}

// NextRequest is a pull request (CONSUMER.MSG.NEXT).
type NextRequest struct {
	Batch     int           `json:"batch"`
	MaxBytes  int           `json:"max_bytes"`
	Expires   time.Duration `json:"expires"`
	NoWait    bool          `json:"no_wait"`
	Heartbeat time.Duration `json:"idle_heartbeat"`
}

// ErrBadNext: a pull request edgeq cannot take.
var ErrBadNext = errors.New("jsapi: bad pull request")

// ParseNext reads a pull request: a JSON object, a bare batch size, or
// empty (one message).
func ParseNext(body []byte, maxBatch int) (NextRequest, error) {
	var r NextRequest
	b := strings.TrimSpace(string(body))
	switch {
	case b == "":
		r.Batch = 1
	case b[0] == '{':
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			return r, fmt.Errorf("%w: %v", ErrBadNext, err)
		}
	default:
		if _, err := fmt.Sscanf(b, "%d", &r.Batch); err != nil {
			return r, fmt.Errorf("%w: %q", ErrBadNext, b)
		}
	}
	if r.Batch <= 0 {
		r.Batch = 1
	}
	if r.Batch > maxBatch {
		return r, fmt.Errorf("%w: Exceeded MaxRequestBatch of %d", ErrBadNext, maxBatch)
	}
	if r.Expires < 0 || r.MaxBytes < 0 || r.Heartbeat < 0 {
		return r, fmt.Errorf("%w: negative value", ErrBadNext)
	}
	return r, nil
}
