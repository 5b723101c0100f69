package uplink

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"edgeq/gateway/groups"
)

// TestHTTPSUplink: a real TLS server verified with ca_file; the body is
// JSON lines with the record's identity and its JSON payload inline.
func TestHTTPSUplink(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var keys []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused on purpose below
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	cfg := testConfig()
	cfg.Type, cfg.CAFile, cfg.HTTP.URL = TypeHTTP, ca, srv.URL
	cfg.Timeout = 30 * time.Second // a TLS handshake on a loaded machine can take seconds
	u, ack := runUplink(t, cfg)
	d := delivery(7, "dev-7", 1)
	d.Record.Payload = []byte(`{"t":21.5}`)
	u.Deliver(d)
	waitUntil(t, "acked", func() bool { return ack.count() == 1 })
	if k := ack.kinds()[7]; k[0] != groups.AckDone {
		t.Fatalf("acks %v", k)
	}
	mu.Lock()
	defer mu.Unlock()
	want := `{"id":"gw:dev-7:7","node":"gw","device":"dev-7","seq":7,"time":1,"payload":{"t":21.5}}` + "\n"
	if len(bodies) != 1 || bodies[0] != want {
		t.Fatalf("bodies %q, want %q", bodies, want)
	}
	if keys[0] != IdempotencyKey([]*Item{{Node: "gw", Device: "dev-7", Seq: 7}}) {
		t.Errorf("key %q", keys[0])
	}

	// Without the CA, the server's certificate is refused: retried, not acked.
	cfg.CAFile = ""
	u2, _ := runUplink(t, cfg)
	u2.Deliver(delivery(8, "dev-8", 1))
	waitUntil(t, "a retry", func() bool { return u2.Stats().Retried > 0 })
	if s := u2.Stats(); s.Acked != 0 || !strings.Contains(s.LastError, "certificate") {
		t.Errorf("stats %+v", s)
	}
}
