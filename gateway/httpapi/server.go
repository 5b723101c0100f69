// Package httpapi is the node's HTTP front end: /healthz and /readyz,
// GET /v1/status and its event stream /v1/events, GET /v1/devices/{device},
// the groups API (/v1/groups), POST /v1/publish/{device}, the console page,
// /metrics (rendered by the node) and, with the NSQ listener on, the nsqd
// and nsqlookupd endpoints go-nsq and the NSQ tools use. Its JSON documents
// are gateway/apiv1's.
//
// The seam: the API meets the node through Node, a small interface of what
// it reads of the running node, and the narrow providers in Config (the
// log, the ingest door, the groups admin, the /metrics handler). The root
// package implements them and wires a Server; nothing here knows its types.
package httpapi

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/gateway/console"
	"edgeq/gateway/hot"
	"edgeq/gateway/nodestats"
	"edgeq/gateway/nsqserver"
	"edgeq/gateway/tlsconf"
	"edgeq/internal/secret"
	"edgeq/wal"
)

// Node is the running node as the API sees it.
type Node interface {
	// Ready: the node started and is not draining (GET /readyz).
	Ready() bool
	// Snapshot copies what /metrics and /v1/status show at one moment, with
	// the top busiest devices and, when device is set, the device
	// collectors' samples. It takes no lock for long: a slow reader holds
	// up no one.
	Snapshot(top int, device bool) nodestats.Snapshot
	// NATSAddr and NSQAddr are the bound listeners' addresses (NSQ: ""
	// when off).
	NATSAddr() string
	NSQAddr() string
	// HotDevice is the hot-device detector's view of device; false when it
	// does not track it (isolation off, or idle).
	HotDevice(device string) (hot.DeviceRate, bool)
}

// Log is what the API reads of the node's log: its health, its extent and
// one device's records.
type Log interface {
	Health() error
	NumPartitions() int
	First(p int) uint64
	Durable(p int) uint64
	Device(device string) (wal.DeviceInfo, bool)
	DevicePartition(device string) int
	HomePartition(device string) int
	HotPartition(device string) int
	DeviceTail(p int, device string, n, maxBytes int) ([]wal.Entry, wal.TailScan, error)
}

var _ Log = (*wal.Log)(nil)

// Appender stores a record and returns once it is durable (or ctx ends).
type Appender interface {
	Append(ctx context.Context, rec *wal.Record) (wal.Position, error)
}

// Config is what a Server serves and with what.
type Config struct {
	// Listen is http.listen; TLS its certificate store (nil: plaintext).
	Listen string
	TLS    *tlsconf.Store
	// NodeID, DataDir and Durability are shown in /v1/status.
	NodeID     string
	DataDir    string
	Durability string
	// Token is http.token, read per request (a reload may change it);
	// empty: the API is open. NSQToken is nsq.auth_token, which nsqd's
	// HTTP API takes as well.
	Token    func() secret.String
	NSQToken secret.String
	// Console serves the console page on / and /console/.
	Console bool
	// EventsInterval and MaxEventStreams bound /v1/events.
	EventsInterval  time.Duration
	MaxEventStreams int
	// MaxPayload is the largest body POST /v1/publish takes (nats.max_payload).
	MaxPayload int64
	// Started is when the node started (nsqd's /stats).
	Started time.Time

	Log     Log
	Ingest  Appender
	Groups  *Groups
	Metrics http.Handler      // GET /metrics
	NSQ     *nsqserver.Server // nil: NSQ is off
}

// Server is the HTTP API of one node.
type Server struct {
	cfg    Config
	node   Node
	logger *slog.Logger
	events *console.Hub // nil when nothing listens
	srv    *http.Server
	ln     net.Listener
}

// New builds the API of node; Start serves it on cfg.Listen.
func New(cfg Config, node Node, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, node: node, logger: logger}
	if cfg.Listen != "" {
		s.events = console.NewHub(s.StatusFrame, cfg.EventsInterval, cfg.MaxEventStreams)
	}
	return s
}

// Events is the console's snapshot stream (/v1/events), nil when the API
// does not listen.
func (s *Server) Events() *console.Hub { return s.events }

// Start listens on cfg.Listen (nothing when it is empty) and serves in a
// goroutine started by goBackground.
func (s *Server) Start(goBackground func(func())) error {
	if s.cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("http: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	// Event streams never end by themselves: Shutdown would wait for them.
	s.srv.RegisterOnShutdown(s.events.Close)
	if s.cfg.TLS != nil {
		s.srv.TLSConfig = s.cfg.TLS.Config()
		ln = tls.NewListener(ln, s.srv.TLSConfig)
	}
	srv := s.srv
	goBackground(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server", "err", err)
		}
	})
	s.logger.Info("listening for HTTP", "addr", ln.Addr().String())
	return nil
}

// Addr is the listener's address, empty when HTTP is off.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops serving, ending the event streams, within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !s.node.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n")
			return
		}
		// Disk trouble (EIO, EROFS, below the free-space watermark): say why.
		if err := s.cfg.Log.Health(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready: "+err.Error()+"\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /v1/status", s.authorized(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Status())
	})))
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.authorized(s.cfg.Metrics))
	}
	if s.events != nil {
		mux.Handle("GET /v1/events", s.authorized(s.events))
	}
	mux.Handle("GET /v1/devices/{device}", s.authorized(http.HandlerFunc(s.handleDevice)))
	if s.cfg.Console {
		page := console.Page()
		mux.Handle("GET /{$}", page)
		mux.Handle("GET /console/", http.StripPrefix("/console", page))
	}
	mux.Handle("POST /v1/publish/{device}", s.authorized(http.HandlerFunc(s.handlePublish)))
	if s.cfg.Groups != nil {
		mux.Handle("GET /v1/groups", s.authorized(http.HandlerFunc(s.handleGroups)))
		mux.Handle("DELETE /v1/groups/{name}", s.authorized(http.HandlerFunc(s.handleDeleteGroup)))
	}
	if s.cfg.NSQ != nil {
		s.mountNSQ(mux)
	}
	return mux
}

// token is http.token now.
func (s *Server) token() secret.String {
	if s.cfg.Token == nil {
		return ""
	}
	return s.cfg.Token()
}

// authorized requires "Authorization: Bearer <http.token>" when a token is set.
func (s *Server) authorized(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := s.token() // a reload may change it
		if token == "" {
			h.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token.Reveal())) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgeq"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiv1.Error{Error: msg})
}
