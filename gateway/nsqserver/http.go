package nsqserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// HTTP serves the part of nsqd's HTTP API that publishers and the NSQ tools
// use, on the node's HTTP port: POST /pub and /mpub (newline-separated or
// ?binary=true), GET /stats (text, or format=json as nsq_stat and nsqadmin
// read it) and GET /info. (GET /ping is nsqlookupd's and nsqd's alike, see
// Lookup.) Topics map to devices as on the TCP listener; answers and
// refusals have nsqd's shape: "OK", or a status with {"message": CODE}
// (edgeq's own refusals add ": what to do").
type HTTP struct {
	Server *Server
	// Authorized reports whether a request may publish or read stats
	// (nil: every request may).
	Authorized func(*http.Request) bool
	// Stored counts the records of the node's log (the telemetry topic's
	// message_count); nil: 0.
	Stored  func() uint64
	Started time.Time
	// DeleteChannel deletes the queue group (filter, channel) as the node's
	// groups API does; its error wraps ErrChannelNotFound for none (404).
	// Nil: /channel/delete is not served.
	DeleteChannel func(filter, channel string) error
}

// ErrChannelNotFound is DeleteChannel's error for a channel that does not
// exist.
var ErrChannelNotFound = errors.New("nsqserver: no such channel")

// ChannelDelete answers POST /channel/delete?topic=&channel= (nsqadmin's
// and the HTTP API's delete of a channel): the channel's queue group goes
// as `edgeq groups rm` deletes it, and is refused as that is (409,
// CHANNEL_IN_USE with the reason: a channel with consumers, an uplink's, a
// declared one).
func (h *HTTP) ChannelDelete(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	q := r.URL.Query()
	topic, channel := q.Get("topic"), q.Get("channel")
	switch {
	case topic == "":
		respondV1(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	case channel == "":
		respondV1(w, http.StatusBadRequest, "MISSING_ARG_CHANNEL")
		return
	case !ValidTopicName([]byte(topic)):
		respondV1(w, http.StatusBadRequest, "INVALID_ARG_TOPIC")
		return
	case !ValidChannelName([]byte(channel)):
		respondV1(w, http.StatusBadRequest, "INVALID_ARG_CHANNEL")
		return
	}
	filter, ok := h.Server.filterOf([]byte(topic))
	if !ok {
		respondV1(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return
	}
	if err := h.DeleteChannel(filter, channel); err != nil {
		if errors.Is(err, ErrChannelNotFound) {
			respondV1(w, http.StatusNotFound, "CHANNEL_NOT_FOUND")
			return
		}
		respondV1(w, http.StatusConflict, "CHANNEL_IN_USE: "+err.Error())
		return
	}
	respondV1(w, http.StatusOK, nil)
}

// respond writes an answer as nsqd's http_api.RespondV1 does.
func respondV1(w http.ResponseWriter, code int, v any) {
	var body []byte
	if code != http.StatusOK {
		body, _ = json.Marshal(map[string]string{"message": fmt.Sprint(v)})
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	} else if s, ok := v.(string); ok {
		body = []byte(s)
	} else if v == nil {
		body = nil
	} else {
		body, _ = json.Marshal(v)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.Header().Set("X-NSQ-Content-Type", "nsq; version=1.0")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (h *HTTP) allowed(w http.ResponseWriter, r *http.Request) bool {
	if h.Authorized == nil || h.Authorized(r) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="edgeq"`)
	respondV1(w, http.StatusUnauthorized, "AUTH_FAILED: send nsq.auth_token (or http.token) as \"Authorization: Bearer <token>\"")
	return false
}

// topicOf reads ?topic= as nsqd does.
func (h *HTTP) topicOf(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	q := r.URL.Query()
	ts, ok := q["topic"]
	if !ok {
		respondV1(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return nil, false
	}
	if !ValidTopicName([]byte(ts[0])) {
		respondV1(w, http.StatusBadRequest, "INVALID_TOPIC")
		return nil, false
	}
	if _, ok := q["defer"]; ok {
		respondV1(w, http.StatusBadRequest, "INVALID_DEFER: edgeq has no deferred messages (one would hold back the rest of its device)")
		return nil, false
	}
	return []byte(ts[0]), true
}

// Pub answers POST /pub?topic=: the body is one message, stored durably
// before the "OK".
func (h *HTTP) Pub(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	limit := int64(h.Server.cfg.MaxMsgSize)
	if r.ContentLength > limit { // before the body: a client waiting for 100-continue sends none
		w.Header().Set("Connection", "close")
		respondV1(w, http.StatusRequestEntityTooLarge, "MSG_TOO_BIG")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		respondV1(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	if int64(len(body)) > limit {
		w.Header().Set("Connection", "close")
		respondV1(w, http.StatusRequestEntityTooLarge, "MSG_TOO_BIG")
		return
	}
	if len(body) == 0 {
		respondV1(w, http.StatusBadRequest, "MSG_EMPTY")
		return
	}
	topic, ok := h.topicOf(w, r)
	if !ok {
		return
	}
	h.store(w, topic, [][]byte{body})
}

// MPub answers POST /mpub?topic=[&binary=true]: messages separated by
// newlines (empty ones skipped), or nsqd's binary MPUB body. A message
// without a device ID refuses the whole batch before anything is stored.
func (h *HTTP) MPub(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	maxBody, maxMsg := int64(h.Server.cfg.MaxBodySize), h.Server.cfg.MaxMsgSize
	if r.ContentLength > maxBody {
		w.Header().Set("Connection", "close")
		respondV1(w, http.StatusRequestEntityTooLarge, "BODY_TOO_BIG")
		return
	}
	topic, ok := h.topicOf(w, r)
	if !ok {
		return
	}
	binaryMode := false
	if v, ok := r.URL.Query()["binary"]; ok {
		binaryMode = v[0] != "false" && v[0] != "0" // nsqd: an unknown value counts as true
	}
	var msgs [][]byte
	var code string
	if binaryMode {
		msgs, code = readBinaryMPUB(io.LimitReader(r.Body, maxBody), maxMsg, maxBody)
	} else {
		msgs, code = readTextMPUB(io.LimitReader(r.Body, maxBody+1), maxMsg, maxBody)
	}
	if code != "" {
		w.Header().Set("Connection", "close")
		status := http.StatusRequestEntityTooLarge
		if code == "INTERNAL_ERROR" {
			status = http.StatusInternalServerError
		}
		respondV1(w, status, code)
		return
	}
	if len(msgs) == 0 {
		respondV1(w, http.StatusBadRequest, "MSG_EMPTY")
		return
	}
	h.store(w, topic, msgs)
}

func readTextMPUB(r io.Reader, maxMsg int, maxBody int64) ([][]byte, string) {
	rd := bufio.NewReader(r)
	var msgs [][]byte
	var total int64
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, "INTERNAL_ERROR"
		}
		total += int64(len(line))
		if total > maxBody {
			return nil, "BODY_TOO_BIG"
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) > maxMsg {
			return nil, "MSG_TOO_BIG"
		}
		if len(line) > 0 {
			msgs = append(msgs, line)
		}
		if err != nil {
			return msgs, ""
		}
	}
}

// readBinaryMPUB reads [count int32][size int32][body]... as nsqd's
// readMPUB; its error codes lose the "E_" as nsqd's HTTP API does.
func readBinaryMPUB(r io.Reader, maxMsg int, maxBody int64) ([][]byte, string) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, "BAD_BODY"
	}
	count := int32(binary.BigEndian.Uint32(n[:]))
	if count <= 0 || int64(count) > (maxBody-4)/5 {
		return nil, "BAD_BODY"
	}
	msgs := make([][]byte, 0, min(int(count), 1024))
	for range count {
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, "BAD_MESSAGE"
		}
		size := int32(binary.BigEndian.Uint32(n[:]))
		if size <= 0 || int(size) > maxMsg {
			return nil, "BAD_MESSAGE"
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, "BAD_MESSAGE"
		}
		msgs = append(msgs, b)
	}
	return msgs, ""
}

// store appends the messages and answers once every one is durable.
func (h *HTTP) store(w http.ResponseWriter, topic []byte, bodies [][]byte) {
	s := h.Server
	recs := make([]wal.Record, len(bodies))
	for i, b := range bodies {
		dev, perr := s.deviceOf(topic, b)
		if perr != nil {
			s.stats.PubErrors.Add(uint64(len(bodies)))
			s.stats.countError(perr.Code)
			msg := "BAD_MESSAGE"
			if perr.Code == "E_BAD_TOPIC" {
				msg = "INVALID_TOPIC"
			}
			if len(bodies) > 1 {
				msg += fmt.Sprintf(": message %d", i)
			}
			respondV1(w, http.StatusBadRequest, msg+": "+perr.Desc)
			return
		}
		recs[i] = wal.Record{Device: dev, Source: "nsq", Payload: b}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	wg.Add(len(recs))
	for i := range recs {
		s.ingest.AppendAsync(&recs[i], func(_ wal.Position, err error) {
			if err != nil {
				s.stats.PubErrors.Add(1)
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			} else {
				s.stats.Published.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		code := "PUB_FAILED"
		if len(recs) > 1 {
			code = "MPUB_FAILED"
		}
		s.stats.countError("E_" + code)
		respondV1(w, http.StatusServiceUnavailable, code+": "+firstErr.Error())
		return
	}
	respondV1(w, http.StatusOK, "OK")
}

// Info answers GET /info as nsqd does.
func (h *HTTP) Info(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	host, tcpPort := "", -1
	if a, ok := h.Server.Addr().(*net.TCPAddr); ok {
		host, tcpPort = a.IP.String(), a.Port
		if a.IP.IsUnspecified() {
			if hh, _, err := net.SplitHostPort(r.Host); err == nil {
				host = hh
			}
		}
	}
	httpPort := -1
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		httpPort = la.Port
	}
	respondV1(w, http.StatusOK, map[string]any{
		"version": h.Server.cfg.Version, "broadcast_address": host, "hostname": h.Server.cfg.NodeID,
		"http_port": httpPort, "tcp_port": tcpPort, "start_time": h.Started.Unix(),
		"max_heartbeat_interval": time.Minute, "max_output_buffer_size": h.Server.cfg.MaxPending,
		"max_output_buffer_timeout": 0, "max_deflate_level": 0,
	})
}

// TopicStats and ChannelStats are nsqd's /stats shapes (the fields nsq_stat
// and nsqadmin read).
type TopicStats struct {
	TopicName    string         `json:"topic_name"`
	Channels     []ChannelStats `json:"channels"`
	Depth        int64          `json:"depth"`
	BackendDepth int64          `json:"backend_depth"`
	MessageCount uint64         `json:"message_count"`
	MessageBytes uint64         `json:"message_bytes"`
	Paused       bool           `json:"paused"`
	// E2E is always empty (nsqd with e2e latency off); nsqadmin's and
	// nsq_stat's aggregation needs the object there.
	E2E latencyQuantiles `json:"e2e_processing_latency"`
}

type latencyQuantiles struct {
	Count       int                  `json:"count"`
	Percentiles []map[string]float64 `json:"percentiles"`
}

// ChannelStats is one channel (queue group) in /stats. Depth is what the
// group has not finished and not in flight (its lag, all of it in the log:
// backend_depth); message_count what entered it since the group started
// here (finished, in flight, depth); requeue_count its naks and the
// messages members left with; timeout_count its ack_wait expiries;
// client_count its members on every node. Figures come from the group's
// leader; another node of a cluster shows zeros.
type ChannelStats struct {
	ChannelName   string           `json:"channel_name"`
	Depth         int64            `json:"depth"`
	BackendDepth  int64            `json:"backend_depth"`
	InFlightCount int              `json:"in_flight_count"`
	DeferredCount int              `json:"deferred_count"`
	MessageCount  uint64           `json:"message_count"`
	RequeueCount  uint64           `json:"requeue_count"`
	TimeoutCount  uint64           `json:"timeout_count"`
	ClientCount   int              `json:"client_count"`
	Clients       []any            `json:"clients"`
	Paused        bool             `json:"paused"`
	E2E           latencyQuantiles `json:"e2e_processing_latency"`
}

// topicOfFilter is filterOf's inverse: the topic whose channels are the
// groups of filter.
func (s *Server) topicOfFilter(filter string) (string, bool) {
	p := s.cfg.TelemetryPrefix
	if filter == p+".>" {
		return p, true
	}
	if rest, ok := strings.CutPrefix(filter, p+"."); ok && ValidTopicName([]byte(filter)) && !strings.ContainsAny(rest, "*>") {
		return filter, true
	}
	return "", false
}

// channelStats is a group's figures as an NSQ channel.
func channelStats(g *groups.GroupStats) ChannelStats {
	var lag uint64
	for _, p := range g.Core.Partitions {
		if d := g.Durable[p.Partition]; d > p.Committed {
			lag += d - p.Committed
		}
	}
	depth := int64(lag) - int64(g.Core.InFlight)
	depth = max(depth, 0)
	clients := 0
	for _, c := range g.Members {
		clients += c
	}
	return ChannelStats{ChannelName: g.Key.Queue, Depth: depth, BackendDepth: depth, InFlightCount: g.Core.InFlight,
		MessageCount: g.Core.Acked + g.Core.Terms + uint64(g.Core.InFlight) + uint64(depth),
		RequeueCount: g.Core.Naks + g.Core.LeaveRequeue,
		TimeoutCount: g.Core.Timeouts,
		ClientCount:  clients,
		Clients:      []any{},
	}
}

// topics are the served topics with their channels: the telemetry topic
// always, a device's topic when it has channels; only topic (and channel)
// when given.
func (h *HTTP) topics(topic, channel string) []TopicStats {
	s := h.Server
	byTopic := map[string]*TopicStats{s.cfg.TelemetryPrefix: {TopicName: s.cfg.TelemetryPrefix, Channels: []ChannelStats{}}}
	if h.Stored != nil {
		byTopic[s.cfg.TelemetryPrefix].MessageCount = h.Stored()
	}
	gs := s.queues.Stats()
	for i := range gs {
		t, ok := s.topicOfFilter(gs[i].Key.Filter)
		if !ok || !ValidChannelName([]byte(gs[i].Key.Queue)) || channel != "" && gs[i].Key.Queue != channel {
			continue
		}
		ts := byTopic[t]
		if ts == nil {
			ts = &TopicStats{TopicName: t, Channels: []ChannelStats{}}
			byTopic[t] = ts
		}
		ts.Channels = append(ts.Channels, channelStats(&gs[i]))
	}
	out := []TopicStats{}
	for name, ts := range byTopic {
		if topic == "" || name == topic {
			out = append(out, *ts)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TopicName < out[j].TopicName })
	return out
}

// Stats answers GET /stats (format=json, topic=, channel=) as nsqd does.
func (h *HTTP) Stats(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	q := r.URL.Query()
	ts := h.topics(q.Get("topic"), q.Get("channel"))
	if q.Get("format") == "json" {
		respondV1(w, http.StatusOK, map[string]any{"version": h.Server.cfg.Version, "health": "OK",
			"start_time": h.Started.Unix(), "topics": ts, "producers": []any{}})
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nsqd v%s (edgeq)\nstart_time %s\nuptime %s\n\nHealth: OK\n", h.Server.cfg.Version,
		h.Started.Format(time.RFC3339), time.Since(h.Started).Round(time.Second))
	if len(ts) == 0 {
		b.WriteString("\nTopics: None\n")
	} else {
		b.WriteString("\nTopics:")
	}
	for _, t := range ts {
		fmt.Fprintf(&b, "\n   [%-15s] depth: %-5d be-depth: %-5d msgs: %-8d\n", t.TopicName, t.Depth, t.BackendDepth, t.MessageCount)
		for _, c := range t.Channels {
			fmt.Fprintf(&b, "      [%-25s] depth: %-5d be-depth: %-5d inflt: %-4d def: %-4d re-q: %-5d timeout: %-5d msgs: %-8d clients: %d\n",
				c.ChannelName, c.Depth, c.BackendDepth, c.InFlightCount, c.DeferredCount, c.RequeueCount, c.TimeoutCount, c.MessageCount, c.ClientCount)
		}
	}
	respondV1(w, http.StatusOK, b.String())
}
