package nsqserver

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
)

// Lookup answers the nsqlookupd endpoints go-nsq's ConnectToNSQLookupd and
// the NSQ tools' --lookupd-http-address use (/lookup?topic=, /ping), naming
// this node as the only producer of the telemetry topics. channels lists
// the topic's channels (queue groups); nil leaves them out.
type Lookup struct {
	Server   *Server
	Channels func(filter string) []string
}

type lookupProducer struct {
	RemoteAddress    string `json:"remote_address"`
	Hostname         string `json:"hostname"`
	BroadcastAddress string `json:"broadcast_address"`
	TCPPort          int    `json:"tcp_port"`
	HTTPPort         int    `json:"http_port"`
	Version          string `json:"version"`
}

type lookupAnswer struct {
	Channels  []string         `json:"channels"`
	Producers []lookupProducer `json:"producers"`
}

// Ping answers OK, as nsqlookupd does.
func (l *Lookup) Ping(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK"))
}

// Topic answers /lookup?topic=: 404 TOPIC_NOT_FOUND for a topic this node
// does not serve.
func (l *Lookup) Topic(w http.ResponseWriter, r *http.Request) {
	v1 := r.Header.Get("Accept") == "application/vnd.nsq; version=1.0"
	topic := r.URL.Query().Get("topic")
	if topic == "" {
		l.reply(w, v1, http.StatusBadRequest, map[string]string{"message": "MISSING_ARG_TOPIC"})
		return
	}
	filter, ok := l.Server.filterOf([]byte(topic))
	if !ok || !ValidTopicName([]byte(topic)) {
		l.reply(w, v1, http.StatusNotFound, map[string]string{"message": "TOPIC_NOT_FOUND"})
		return
	}
	host, port := "", 0
	if a, ok := l.Server.Addr().(*net.TCPAddr); ok {
		host, port = a.IP.String(), a.Port
		if a.IP.IsUnspecified() {
			// Listening on every address: name the one this client reached.
			if h, _, err := net.SplitHostPort(r.Host); err == nil {
				host = h
			}
		}
	}
	httpPort := 0
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		httpPort = la.Port
	}
	ans := lookupAnswer{Channels: []string{}, Producers: []lookupProducer{{
		RemoteAddress: net.JoinHostPort(host, strconv.Itoa(port)), Hostname: l.Server.cfg.NodeID,
		BroadcastAddress: host, TCPPort: port, HTTPPort: httpPort, Version: l.Server.cfg.Version,
	}}}
	if l.Channels != nil {
		ans.Channels = append(ans.Channels, l.Channels(filter)...)
	}
	l.reply(w, v1, http.StatusOK, ans)
}

// reply writes v as nsqlookupd does: bare for clients that ask for the v1
// API (go-nsq), wrapped in status_code/status_txt/data for older ones.
func (l *Lookup) reply(w http.ResponseWriter, v1 bool, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	var body any = v
	if v1 {
		w.Header().Set("X-NSQ-Content-Type", "nsq; version=1.0")
	} else {
		txt := "OK"
		if m, ok := v.(map[string]string); ok {
			txt = m["message"]
		}
		body = map[string]any{"status_code": code, "status_txt": txt, "data": v}
		code = http.StatusOK
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
