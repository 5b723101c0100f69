package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
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
	Defaults groups.CoreConfig
	// StateFile keeps the consumer definitions across restarts
	// (<data_dir>/jetstream-consumers.json); empty: not kept.
	StateFile string
	// Clustered: the node is in a cluster, where a group lives on every
	// node: CONSUMER.DELETE forgets the name, then hands the group to
	// DeleteGroup (which deletes it on every node), and consumers that
	// expire (ephemeral, inactive_threshold) are refused.
	Clustered bool
	// KVBucket names the read-only KV view of the log (stream
	// KV_<bucket>, keys are device IDs, a key's value is the device's
	// newest reading); empty: no view.
	KVBucket string
	// MaxDevices bounds the last-value index (the log's max_devices).
	MaxDevices int
	// MaxOrdered bounds the ordered consumers (ack none) of the node,
	// MaxOrderedPerConn those of one connection (the front end's part).
	MaxOrdered, MaxOrderedPerConn int
	// DeleteGroup deletes a queue group that is not a consumer (CONSUMER.
	// DELETE of one shown as a consumer, see groups.go); its error says why
	// not (wrapping ErrGroupNotFound: 404). Nil: such groups are listed only.
	DeleteGroup func(groups.GroupKey) error
	Logger      *slog.Logger // nil: slog.Default()
}

// KVStreamPrefix starts the name of a KV bucket's stream.
const KVStreamPrefix = "KV_"

// Registry is what the API needs of gateway/groups.
type Registry interface {
	Declare(gc groups.GroupConfig) error
	Remove(key groups.GroupKey, owned func(groups.Member) bool) error
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
	// Deleted counts consumers deleted by CONSUMER.DELETE, Expired those
	// removed after their inactive_threshold.
	Deleted, Expired atomic.Uint64

	hooks  Hooks // set once by SetHooks, before use
	logger *slog.Logger

	last    *LastIndex
	ordered orderedSet
}

// Hooks are the front end's part in a consumer's life.
type Hooks struct {
	// Created learns of a consumer created or restored (a push consumer
	// has a member of the server's own). Called with the Service's lock.
	Created func(*Consumer)
	// Deleted learns of a consumer deleted or expired, after its queue
	// group was removed: the front end drops its members and ends their
	// waiting pull requests. Called without the lock.
	Deleted func(*Consumer)
	// Owned reports whether a member of a consumer's group is the front
	// end's own (a JetStream member), which a delete may drop; any other
	// (a core NATS, NSQ or uplink member) makes the delete refused.
	Owned func(groups.Member) bool
	// Waiting counts a consumer's pull requests outstanding (CONSUMER.INFO
	// num_waiting). Called with the lock.
	Waiting func(*Consumer) int
	// OrderedCreated learns of an ordered consumer created; the front end
	// serves it until it is Gone. Called without locks.
	OrderedCreated func(*Ordered)
}

// SetHooks tells the front end of consumers created and deleted. Call
// before serving and before Restore.
func (s *Service) SetHooks(h Hooks) { s.hooks = h }

// Consumer is a JetStream consumer: a queue group with a name.
type Consumer struct {
	Name    string
	Config  jetstream.ConsumerConfig
	Key     groups.GroupKey
	Created time.Time
	// Ephemeral: created without a durable name; like a durable with an
	// inactive_threshold, it is removed once inactive that long.
	Ephemeral bool

	active time.Time // last sign of use; guarded by Service.mu
	seq    atomic.Uint64
}

// NextSeq numbers a delivery of the consumer: consumer sequences grow across
// all its members and their connections (a reconnecting worker does not
// start again at 1). They start again at 1 when the node restarts.
func (c *Consumer) NextSeq() uint64 { return c.seq.Add(1) }

// NewService returns the API over l and reg.
func NewService(cfg Config, l *wal.Log, reg Registry) *Service {
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = 64
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.MaxOrdered <= 0 {
		cfg.MaxOrdered = 256
	}
	if cfg.MaxOrderedPerConn <= 0 {
		cfg.MaxOrderedPerConn = 16
	}
	logger = logger.With("component", "jetstream")
	return &Service{cfg: cfg, log: l, reg: reg, created: time.Now().UTC(), now: time.Now, consumers: map[string]*Consumer{},
		logger: logger, last: NewLastIndex(l, cfg.MaxDevices, logger), ordered: orderedSet{m: map[string]*Ordered{}, readers: make(chan struct{}, orderedReaders),
			some: make(chan struct{})}}
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
	CodeStoreFailed      = 10077 // JSStreamStoreFailedF: the log refused the append
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
func (s *Service) Handle(api string, body []byte) []byte { return s.HandleFrom(api, body, 0) }

// HandleFrom is Handle for a call from connection owner (which owns the
// ordered consumers it creates).
func (s *Service) HandleFrom(api string, body []byte, owner uint64) []byte {
	s.Total.Add(1)
	out, e := s.handle(api, body, owner)
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

func (s *Service) handle(api string, body []byte, owner uint64) ([]byte, *APIError) {
	tok := strings.Split(api, ".")
	switch {
	case api == "INFO":
		return s.accountInfo(), nil
	case api == "STREAM.NAMES":
		names := []string{}
		for _, v := range s.views() {
			if streamNamesSubject(body, v) {
				names = append(names, v.name)
			}
		}
		return marshal("stream_names_response", map[string]any{"total": len(names), "offset": 0, "limit": 1024, "streams": names}), nil
	case api == "STREAM.LIST":
		infos := []jetstream.StreamInfo{}
		for _, v := range s.views() {
			if streamNamesSubject(body, v) {
				infos = append(infos, s.streamInfo(v))
			}
		}
		return marshal("stream_list_response", map[string]any{"total": len(infos), "offset": 0, "limit": 256, "streams": infos}), nil
	case len(tok) == 3 && tok[0] == "STREAM" && tok[1] == "INFO":
		v, ok := s.view(tok[2])
		if !ok {
			return nil, errStreamNotFound
		}
		return marshal("stream_info_response", s.streamInfo(v)), nil
	case len(tok) == 3 && tok[0] == "CONSUMER" && (tok[1] == "NAMES" || tok[1] == "LIST"):
		if _, ok := s.view(tok[2]); !ok {
			return nil, errStreamNotFound
		}
		if tok[1] == "NAMES" {
			names := s.allConsumerNames(tok[2])
			return marshal("consumer_names_response", map[string]any{"total": len(names), "offset": 0, "limit": 1024, "consumers": names}), nil
		}
		infos := []jetstream.ConsumerInfo{}
		for _, n := range s.allConsumerNames(tok[2]) {
			if ci, ok := s.anyConsumerInfo(tok[2], n); ok {
				infos = append(infos, ci)
			}
		}
		return marshal("consumer_list_response", map[string]any{"total": len(infos), "offset": 0, "limit": 256, "consumers": infos}), nil
	case len(tok) >= 4 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		if e := checkCreateFilter(strings.Join(tok[4:], "."), body); e != nil {
			return nil, e
		}
		return s.createConsumer(tok[2], tok[3], body, false, owner)
	case len(tok) == 3 && tok[0] == "CONSUMER" && tok[1] == "CREATE":
		return s.createConsumer(tok[2], "", body, false, owner)
	case len(tok) == 5 && tok[0] == "CONSUMER" && tok[1] == "DURABLE" && tok[2] == "CREATE":
		return s.createConsumer(tok[3], tok[4], body, true, owner)
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "INFO":
		if _, ok := s.view(tok[2]); !ok {
			return nil, errStreamNotFound
		}
		ci, ok := s.anyConsumerInfo(tok[2], tok[3])
		if !ok {
			return nil, errConsumerNotFound
		}
		return marshal("consumer_info_response", ci), nil
	case len(tok) == 4 && tok[0] == "CONSUMER" && tok[1] == "DELETE":
		if _, ok := s.view(tok[2]); !ok {
			return nil, errStreamNotFound
		}
		if o := s.Ordered(tok[2], tok[3]); o != nil {
			s.removeOrdered(o)
			return marshal("consumer_delete_response", map[string]any{"success": true}), nil
		}
		if tok[2] != s.cfg.Stream {
			return nil, errConsumerNotFound
		}
		if e := s.deleteAny(tok[3]); e != nil {
			return nil, e
		}
		return marshal("consumer_delete_response", map[string]any{"success": true}), nil
	case len(tok) >= 2 && tok[0] == "STREAM" && tok[1] == "MSG" && len(tok) == 4 && tok[2] == "DELETE":
		return nil, s.readOnly(tok[3], "deleting a message")
	case len(tok) >= 3 && tok[0] == "STREAM" && (tok[1] == "CREATE" || tok[1] == "UPDATE" || tok[1] == "DELETE" || tok[1] == "PURGE") &&
		strings.HasPrefix(tok[2], KVStreamPrefix):
		return nil, s.readOnly(tok[2], strings.ToLower(tok[1]))
	case len(tok) >= 2 && tok[0] == "STREAM" && (tok[1] == "CREATE" || tok[1] == "UPDATE" || tok[1] == "DELETE" || tok[1] == "PURGE"):
		return nil, Err(400, CodeNotSupported, "edgeq: the stream is the node's log, set by its configuration (jetstream.stream); %s is not supported", strings.ToLower(tok[1]))
	}
	return nil, Err(400, CodeNotSupported, "edgeq: JetStream API %q is not supported (see docs/jetstream.md)", api)
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

// streamInfo describes the log as stream v; first/last follow the stream
// sequence (offset-major), times are those of the records there.
//
// A message stored before the request is counted, as JetStream counts it,
// even one published without a reply subject (wal.Record.NoWait): the log
// shows only durable records, so the answer first waits (a bounded while)
// for a commit round that covers everything appended so far.
func (s *Service) streamInfo(v streamView) jetstream.StreamInfo {
	ctx, cancel := context.WithTimeout(context.Background(), streamInfoSync)
	if err := s.log.Sync(ctx); err != nil {
		s.logger.Debug("stream info: sync", "err", err)
	}
	cancel()
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
	st.Consumers += s.ordered.count(v.name)
	cfg := jetstream.StreamConfig{Name: v.name, Subjects: []string{v.prefix + ".>"}, Retention: jetstream.LimitsPolicy,
		MaxConsumers: s.cfg.MaxConsumers, MaxMsgs: -1, MaxBytes: s.cfg.MaxBytes, MaxAge: s.cfg.MaxAge, MaxMsgsPerSubject: -1,
		MaxMsgSize: -1, Discard: jetstream.DiscardOld, Storage: jetstream.FileStorage, Replicas: 1, Duplicates: s.cfg.DuplicateWindow,
		DenyDelete: true, DenyPurge: true, AllowDirect: true}
	if v.kv {
		// What KV clients check (nats.go's KeyValue: max_msgs_per_subject
		// >= 1; natscli's kv commands read history and TTL from it). The
		// view holds one value per key, the device's newest reading.
		cfg.Description = "edgeq: read-only view of " + s.cfg.Stream + ": key = device ID, value = its newest reading"
		cfg.MaxMsgsPerSubject, cfg.Discard, cfg.AllowRollup, cfg.Duplicates = 1, jetstream.DiscardNew, false, 2*time.Minute
		cfg.MaxConsumers = -1
		cfg.Metadata = map[string]string{"edgeq_read_only": "true"}
		// One value per key: once the last-value index has caught up,
		// values are its devices (the bytes stay the log's).
		if s.last.Ready() {
			st.Msgs = uint64(s.last.Len())
			st.NumSubjects = st.Msgs
		}
	}
	return jetstream.StreamInfo{Config: cfg, Created: s.created, State: st, TimeStamp: s.now().UTC()}
}

// views are the streams the node answers for: its stream, then the KV view.
func (s *Service) views() []streamView {
	vs := []streamView{{name: s.cfg.Stream, prefix: s.cfg.Prefix}}
	if v, ok := s.view(KVStreamPrefix + s.cfg.KVBucket); ok && s.cfg.KVBucket != "" {
		vs = append(vs, v)
	}
	return vs
}

// streamNamesSubject applies STREAM.NAMES/LIST's subject filter
// ({"subject":"telemetry.d1"}, how clients find a subject's stream).
func streamNamesSubject(body []byte, v streamView) bool {
	var req struct {
		Subject string `json:"subject"`
	}
	if len(body) == 0 || json.Unmarshal(body, &req) != nil || req.Subject == "" {
		return true
	}
	if all, _, ok := v.match(req.Subject); ok || all {
		return true
	}
	// A filter wider than the view's prefix ("$KV.>", ">") overlaps it.
	return req.Subject == ">" || strings.HasSuffix(req.Subject, ".>") && strings.HasPrefix(v.prefix+".", strings.TrimSuffix(req.Subject, ">"))
}

// readOnly is the answer to a write to stream: the KV view is read-only,
// the node's stream is its log.
func (s *Service) readOnly(stream, what string) *APIError {
	if v, ok := s.view(stream); ok && v.kv {
		return Err(400, CodeKVReadOnly, "edgeq: KV bucket %q is a read-only view of the %s stream (key = device ID, value = its newest reading); %s is not supported: publish to %s.<device> instead",
			s.cfg.KVBucket, s.cfg.Stream, what, s.cfg.Prefix)
	}
	if _, ok := s.view(stream); !ok {
		return errStreamNotFound
	}
	return Err(400, CodeNotSupported, "edgeq: the stream is the node's log; %s is not supported", what)
}

// KVReadOnly is the pub-ack error of a publish to the KV view's subjects
// (a put, delete, purge or create).
func (s *Service) KVReadOnly() *APIError {
	return s.readOnly(KVStreamPrefix+s.cfg.KVBucket, "writing a key")
}

// KVPrefix is the subject prefix of the KV view ("$KV.<bucket>."), empty
// when there is none.
func (s *Service) KVPrefix() string {
	if s.cfg.KVBucket == "" {
		return ""
	}
	return "$KV." + s.cfg.KVBucket + "."
}

// streamInfoSync bounds how long stream info waits for a commit round.
const streamInfoSync = 2 * time.Second

func (s *Service) recordTime(p int, off uint64) time.Time {
	b, err := s.log.Read(p, off, 1, 1)
	if err != nil || len(b.Entries) == 0 {
		return time.Time{}
	}
	return time.Unix(0, b.Entries[0].Record.Time).UTC()
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
