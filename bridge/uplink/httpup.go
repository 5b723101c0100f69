package uplink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// httpTransport POSTs batches as JSON lines or a JSON array. A batch is
// atomic: the status of the response is every record's outcome.
type httpTransport struct {
	cfg    *Config
	client *http.Client
	up     atomic.Bool
	buf    bytes.Buffer
}

func newHTTP(cfg *Config) (*httpTransport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // an uplink goes where its URL says
	if cfg.wantsTLS() {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &httpTransport{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

func (t *httpTransport) Connected() bool { return t.up.Load() }
func (t *httpTransport) Close()          { t.client.CloseIdleConnections() }

// atomicBatches: a failed batch is retried as it is, so that its
// idempotency key stays the same.
func (t *httpTransport) atomicBatches() bool { return true }

// IdempotencyKey is the key of a batch: a digest of its records' IDs, the
// same for every retry of the same records.
func IdempotencyKey(batch []*Item) string {
	h := sha256.New()
	for _, it := range batch {
		h.Write([]byte(it.MsgID()))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// wireRecord is one record in a POST body. Payload is the payload itself
// when it is valid JSON, else PayloadBase64 carries it.
type wireRecord struct {
	ID            string            `json:"id"` // node:device:seq, for per-record dedup
	Node          string            `json:"node"`
	Device        string            `json:"device"`
	Seq           uint64            `json:"seq"`
	Time          int64             `json:"time"` // ingest time, unix ns
	Source        string            `json:"source,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 string            `json:"payload_base64,omitempty"`
}

func (t *httpTransport) body(batch []*Item) []byte {
	t.buf.Reset()
	array := t.cfg.HTTP.Format == "array"
	if array {
		t.buf.WriteByte('[')
	}
	for i, it := range batch {
		w := wireRecord{ID: it.MsgID(), Node: it.Node, Device: it.Device, Seq: it.Seq, Time: it.Time, Source: it.Source}
		if len(it.Headers) > 0 {
			w.Headers = make(map[string]string, len(it.Headers))
			for _, h := range it.Headers {
				w.Headers[h.Key] = h.Value
			}
		}
		if json.Valid(it.Payload) {
			w.Payload = it.Payload
		} else {
			w.PayloadBase64 = base64.StdEncoding.EncodeToString(it.Payload)
		}
		b, _ := json.Marshal(&w) // cannot fail: strings, numbers and valid JSON
		if array && i > 0 {
			t.buf.WriteByte(',')
		}
		t.buf.Write(b)
		if !array {
			t.buf.WriteByte('\n')
		}
	}
	if array {
		t.buf.WriteByte(']')
	}
	return t.buf.Bytes()
}

func (t *httpTransport) Send(ctx context.Context, batch []*Item, res []Result) {
	r := t.post(ctx, batch)
	for i := range res {
		res[i] = r
	}
}

func (t *httpTransport) post(ctx context.Context, batch []*Item) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.HTTP.URL, bytes.NewReader(t.body(batch)))
	if err != nil {
		return Result{Outcome: Permanent, Err: fmt.Errorf("http request: %w", err)}
	}
	ct := "application/x-ndjson"
	if t.cfg.HTTP.Format == "array" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	for k, v := range t.cfg.HTTP.Headers {
		req.Header.Set(k, v.Reveal())
	}
	req.Header.Set(t.cfg.HTTP.IdempotencyHeader, IdempotencyKey(batch))
	req.Header.Set("Edgeq-Records", strconv.Itoa(len(batch)))
	resp, err := t.client.Do(req)
	if err != nil {
		t.up.Store(false)
		return Result{Outcome: Retry, Err: fmt.Errorf("http post: %w", err)}
	}
	t.up.Store(true)
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // keep the connection reusable
	resp.Body.Close()
	r := classifyHTTP(resp.StatusCode, bytes.TrimSpace(msg))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), resp.Header.Get("Date"), time.Now()); ok {
			r.RetryAfter = d
		}
	}
	return r
}

// classifyHTTP: 2xx is acknowledged; 408, 429 and 5xx are retried; any
// other status is a refusal for good. (post adds a 429's or 503's
// Retry-After.)
func classifyHTTP(code int, msg []byte) Result {
	switch {
	case code >= 200 && code < 300:
		return Result{Outcome: OK}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return Result{Outcome: Retry, Err: fmt.Errorf("http status %d: %s", code, msg)}
	default:
		return Result{Outcome: Permanent, Err: fmt.Errorf("http status %d: %s", code, msg)}
	}
}
