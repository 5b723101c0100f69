package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// httpUpstream is an HTTP endpoint that fails on purpose: the first POST
// gets a 500, the second is answered only after the client gave up (it
// stores the records, as a server whose answer was lost would), then it
// answers 200. A batch with a poison record gets 400. It dedups by
// idempotency key.
type httpUpstream struct {
	mu       sync.Mutex
	requests int
	byKey    map[string]string // key -> body digest: a key always names the same records
	accepted map[string]bool   // keys whose records are stored
	records  []httpRecord      // stored, in order
	failedKs []string          // keys that got a 500 or a lost answer
	bad      int               // 400s sent
	t        *testing.T
}

type httpRecord struct {
	ID      string          `json:"id"`
	Device  string          `json:"device"`
	Seq     uint64          `json:"seq"`
	Payload json.RawMessage `json:"payload"`
	B64     string          `json:"payload_base64"`
}

func (u *httpUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var recs []httpRecord
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec httpRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			u.t.Errorf("bad JSON line %q: %v", sc.Text(), err)
			w.WriteHeader(400)
			return
		}
		recs = append(recs, rec)
	}
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ID
	}
	digest := strings.Join(ids, ",")
	u.mu.Lock()
	u.requests++
	n := u.requests
	if key == "" {
		u.t.Errorf("request without Idempotency-Key")
	} else if d, ok := u.byKey[key]; ok && d != digest {
		u.t.Errorf("idempotency key %s reused for other records", key)
	}
	u.byKey[key] = digest
	poison := false
	for _, rec := range recs {
		if string(rec.Payload) == `"poison"` {
			poison = true
		}
	}
	store := func() {
		if !u.accepted[key] {
			u.accepted[key] = true
			u.records = append(u.records, recs...)
		}
	}
	switch {
	case poison:
		u.bad++
		u.mu.Unlock()
		http.Error(w, "poison record", http.StatusBadRequest)
		return
	case n == 1:
		u.failedKs = append(u.failedKs, key)
		u.mu.Unlock()
		http.Error(w, "try later", http.StatusInternalServerError)
		return
	case n == 2:
		u.failedKs = append(u.failedKs, key)
		store()
		u.mu.Unlock()
		time.Sleep(2 * time.Second) // beyond the uplink's timeout
		return
	}
	store()
	u.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func TestUplinkHTTPFailures(t *testing.T) {
	up := &httpUpstream{byKey: map[string]string{}, accepted: map[string]bool{}, t: t}
	srv := httptest.NewServer(up)
	defer srv.Close()
	n := newNode(t, fmt.Sprintf(`uplinks:
  - name: web
    type: http
    timeout: 500ms
    retry_min: 50ms
    retry_max: 500ms
    http:
      url: %s/ingest
      batch: 50
`, srv.URL))
	n.start()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	dlq, err := nc.SubscribeSync("$EQ.DLQ.uplink:web")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	pub := newPublisherOn(t, nc, 100)
	const devices, rounds = 20, 25
	for i := 1; i <= rounds; i++ {
		for d := 0; d < devices; d++ {
			pub.publish(fmt.Sprintf("web-%02d", d), fmt.Sprintf(`{"d":%d,"i":%d}`, d, i))
		}
		if i == 10 {
			pub.publish("web-poison", `"poison"`)
		}
	}
	waitFor(t, "all acked by edgeq", 30*time.Second, func() bool { return pub.acked() == devices*rounds+1 })
	waitFor(t, "all records upstream", 60*time.Second, func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return len(up.records) >= devices*rounds
	})
	m, err := dlq.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no dead letter for the poison record: %v", err)
	}
	if string(m.Data) != `"poison"` || m.Header.Get("Edgeq-Device") != "web-poison" {
		t.Fatalf("dead letter %q %v, want the poison record", m.Data, m.Header)
	}
	time.Sleep(500 * time.Millisecond)
	up.mu.Lock()
	defer up.mu.Unlock()
	seen := map[string]int{}
	last := map[string]int{}
	for _, r := range up.records {
		seen[r.ID]++
		var p struct{ D, I int }
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatalf("record %s payload %s: %v", r.ID, r.Payload, err)
		}
		if p.I <= last[r.Device] {
			t.Fatalf("device %s: %d after %d upstream", r.Device, p.I, last[r.Device])
		}
		last[r.Device] = p.I
		if !strings.HasPrefix(r.ID, "e2e-node:"+r.Device+":") || strconv.FormatUint(r.Seq, 10) != r.ID[strings.LastIndexByte(r.ID, ':')+1:] {
			t.Fatalf("record id %q seq %d", r.ID, r.Seq)
		}
	}
	for id, c := range seen {
		if c > 1 {
			t.Errorf("record %s stored %d times despite idempotency keys", id, c)
		}
	}
	if len(seen) != devices*rounds {
		t.Errorf("%d distinct records upstream, want %d", len(seen), devices*rounds)
	}
	// The keys that failed were retried (same key, same records).
	for _, k := range up.failedKs {
		if !up.accepted[k] {
			t.Errorf("key %s failed and was never retried to success", k)
		}
	}
	if up.bad == 0 {
		t.Errorf("no 400 answered")
	}
	t.Logf("%d requests, %d records, %d answered 400", up.requests, len(up.records), up.bad)
}
