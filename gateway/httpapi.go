package gateway

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	"edgeq/gateway/console"
	"edgeq/gateway/nsqserver"
	"edgeq/internal/secret"
	"edgeq/wal"
)

// nsqChannels lists the queues of the groups with filter: an NSQ topic's
// channels.
func (n *Node) nsqChannels(filter string) []string {
	var out []string
	for _, g := range n.queues.Stats() {
		if g.Key.Filter == filter {
			out = append(out, g.Key.Queue)
		}
	}
	return out
}

func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !n.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n")
			return
		}
		// Disk trouble (EIO, EROFS, below the free-space watermark): say why.
		if err := n.log.Health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready: "+err.Error()+"\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /v1/status", n.authorized(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})))
	mux.Handle("GET /metrics", n.authorized(http.HandlerFunc(n.handleMetrics)))
	if n.events != nil {
		mux.Handle("GET /v1/events", n.authorized(n.events))
	}
	mux.Handle("GET /v1/devices/{device}", n.authorized(http.HandlerFunc(n.handleDevice)))
	if n.cfg.HTTP.Console {
		page := console.Page()
		mux.Handle("GET /{$}", page)
		mux.Handle("GET /console/", http.StripPrefix("/console", page))
	}
	mux.Handle("POST /v1/publish/{device}", n.authorized(http.HandlerFunc(n.handlePublish)))
	mux.Handle("GET /v1/groups", n.authorized(http.HandlerFunc(n.handleGroups)))
	mux.Handle("DELETE /v1/groups/{name}", n.authorized(http.HandlerFunc(n.handleDeleteGroup)))
	if n.nsq != nil {
		// nsqlookupd's endpoints, for go-nsq's ConnectToNSQLookupd; open like
		// /healthz (they name only the NSQ address, and the channels when
		// the API has no token).
		l := &nsqserver.Lookup{Server: n.nsq, Channels: func(filter string) []string {
			if n.httpToken.Load().IsSet() { // read per request: a reload may set one
				return nil
			}
			return n.nsqChannels(filter)
		}}
		mux.HandleFunc("GET /lookup", l.Topic)
		mux.HandleFunc("GET /ping", l.Ping) // nsqd's /ping answers the same
		// nsqd's own HTTP API, for publishers and the NSQ tools.
		h := &nsqserver.HTTP{Server: n.nsq, Authorized: n.nsqAuthorized, Stored: n.storedRecords, Started: n.started,
			DeleteChannel: n.deleteChannel}
		mux.HandleFunc("POST /pub", h.Pub)
		mux.HandleFunc("POST /mpub", h.MPub)
		mux.HandleFunc("GET /stats", h.Stats)
		mux.HandleFunc("GET /info", h.Info)
		mux.HandleFunc("POST /channel/delete", h.ChannelDelete)
	}
	return mux
}

// nsqAuthorized: nsqd's HTTP API takes the NSQ listener's auth token or
// http.token as a bearer token when either is set.
func (n *Node) nsqAuthorized(r *http.Request) bool {
	token, nsqToken := *n.httpToken.Load(), n.cfg.NSQ.AuthToken
	if !token.IsSet() && !nsqToken.IsSet() {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	for _, t := range []secret.String{token, nsqToken} {
		if t.IsSet() && subtle.ConstantTimeCompare([]byte(got), []byte(t.Reveal())) == 1 {
			return true
		}
	}
	return false
}

// storedRecords counts the records in the node's log.
func (n *Node) storedRecords() uint64 {
	var total uint64
	for p := 0; p < n.log.NumPartitions(); p++ {
		if first, last := n.log.First(p), n.log.Durable(p); last >= first && last > 0 {
			total += last - first + 1
		}
	}
	return total
}

// authorized requires "Authorization: Bearer <http.token>" when a token is set.
func (n *Node) authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := *n.httpToken.Load() // a reload may change it
		if token == "" {
			h.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token.Reveal())) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgeq"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// PublishResponse is the answer to POST /v1/publish/{device}.
type PublishResponse struct {
	Node      string `json:"node"`
	Partition int    `json:"partition"`
	Offset    uint64 `json:"offset"`
	Seq       uint64 `json:"seq"`
}

// handlePublish stores the request body as one message of the device and
// answers once it is durable. Request headers named Edgeq-H-<Key> are stored
// as record headers <Key>; Content-Type is kept as well (it says what the
// payload is), except application/x-www-form-urlencoded, which is what curl
// and other tools send for --data by default, not the sender's word. No other
// transport header (User-Agent, Accept, Host, Expect, Authorization, ...) is
// stored.
//
// A body announced larger than the limit is refused (413) before it is read:
// Go's server sends "100 Continue" only when a handler reads the body, so a
// client that waits for it (curl's default Expect: 100-continue above 1 MiB)
// never sends the body and gets the 413 instead of a reset connection.
func (n *Node) handlePublish(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if err := wal.ValidateDeviceID(device); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	limit := int64(n.cfg.NATS.MaxPayload)
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("payload of %d bytes over the limit of %d (nats.max_payload)", r.ContentLength, limit)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read body: " + err.Error()})
		return
	}
	if int64(len(body)) > limit {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("payload over %d bytes (nats.max_payload)", limit)})
		return
	}
	rec := &wal.Record{Device: device, Source: "http", Payload: body}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, formContentType) {
		rec.Headers = append(rec.Headers, wal.Header{Key: "Content-Type", Value: ct})
	}
	for k, vs := range r.Header {
		if key, ok := strings.CutPrefix(k, "Edgeq-H-"); ok && len(vs) > 0 && len(rec.Headers) < wal.MaxHeaders {
			rec.Headers = append(rec.Headers, wal.Header{Key: key, Value: vs[0]})
		}
	}
	pos, err := n.ingest.Append(r.Context(), rec)
	if err != nil {
		writeJSON(w, publishStatus(err), map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, PublishResponse{Node: n.id, Partition: pos.Partition, Offset: pos.Offset, Seq: pos.Seq})
}

// formContentType is the Content-Type curl sends with --data by default.
const formContentType = "application/x-www-form-urlencoded"

func publishStatus(err error) int {
	switch {
	case errors.Is(err, wal.ErrBadDeviceID):
		return http.StatusBadRequest
	case errors.Is(err, wal.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, wal.ErrFull), errors.Is(err, syscall.ENOSPC):
		return http.StatusInsufficientStorage
	case errors.Is(err, wal.ErrTooManyDevices):
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
