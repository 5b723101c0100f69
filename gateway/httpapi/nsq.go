package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"edgeq/gateway/nsqserver"
	"edgeq/internal/secret"
)

// mountNSQ serves nsqlookupd's endpoints, for go-nsq's
// ConnectToNSQLookupd, open like /healthz (they name only the NSQ address,
// and the channels when the API has no token), and nsqd's own HTTP API, for
// publishers and the NSQ tools.
func (s *Server) mountNSQ(mux *http.ServeMux) {
	l := &nsqserver.Lookup{Server: s.cfg.NSQ, Channels: func(filter string) []string {
		if s.token().IsSet() || s.cfg.Groups == nil { // read per request: a reload may set one
			return nil
		}
		return s.cfg.Groups.channels(filter)
	}}
	mux.HandleFunc("GET /lookup", l.Topic)
	mux.HandleFunc("GET /ping", l.Ping) // nsqd's /ping answers the same
	h := &nsqserver.HTTP{Server: s.cfg.NSQ, Authorized: s.nsqAuthorized, Stored: s.storedRecords, Started: s.cfg.Started}
	if s.cfg.Groups != nil {
		h.DeleteChannel = s.cfg.Groups.DeleteChannel
	}
	mux.HandleFunc("POST /pub", h.Pub)
	mux.HandleFunc("POST /mpub", h.MPub)
	mux.HandleFunc("GET /stats", h.Stats)
	mux.HandleFunc("GET /info", h.Info)
	mux.HandleFunc("POST /channel/delete", h.ChannelDelete)
}

// nsqAuthorized: nsqd's HTTP API takes the NSQ listener's auth token or
// http.token as a bearer token when either is set.
func (s *Server) nsqAuthorized(r *http.Request) bool {
	token, nsqToken := s.token(), s.cfg.NSQToken
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
func (s *Server) storedRecords() uint64 {
	var total uint64
	log := s.cfg.Log
	for p := 0; p < log.NumPartitions(); p++ {
		if first, last := log.First(p), log.Durable(p); last >= first && last > 0 {
			total += last - first + 1
		}
	}
	return total
}
