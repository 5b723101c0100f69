package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"edgeq/gateway"
	"edgeq/gateway/apiv1"
	"edgeq/gateway/config"
	"edgeq/gateway/httpapi"
	"edgeq/gateway/metrics/lint"
	"edgeq/wal"
)

// startNode runs a node on loopback ports with its data in a temp dir.
func startNode(t testing.TB, mod func(*config.Config)) (*gateway.Node, config.Config) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.NodeID = "metrics-test"
	cfg.NATS.Listen = "127.0.0.1:0"
	cfg.HTTP.Listen = "127.0.0.1:0"
	if mod != nil {
		mod(&cfg)
	}
	n, err := gateway.NewNode(cfg, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(5 * time.Second) })
	return n, cfg
}

// appendN appends count 10-byte records over 7 devices, each durable
// before the next.
func appendN(t testing.TB, n *gateway.Node, prefix string, count int) {
	t.Helper()
	for i := range count {
		dev := fmt.Sprintf("%s-%d", prefix, i%7)
		if _, err := n.Ingest().Append(context.Background(), &wal.Record{Device: dev, Source: "test", Payload: []byte("0123456789")}); err != nil {
			t.Fatal(err)
		}
	}
}

// values scrapes /metrics through the API's handler and lints it.
func values(t testing.TB, n *gateway.Node) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	n.API().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d", rec.Code)
	}
	body := rec.Body.Bytes()
	if err := lint.Check(body, lint.Policy{Prefix: "edgeq_"}).Err(); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	v, err := lint.Values(body)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getDevice(t *testing.T, h http.Handler, path, token string) (int, apiv1.DeviceView) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var v apiv1.DeviceView
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, rec.Body)
		}
	}
	return rec.Code, v
}

// TestDeviceEndpoint: GET /v1/devices/{id} shows what the log holds of one
// device, newest first, bounded, with payloads as text or base64; bad IDs
// and bounds are refused, and the token applies.
func TestDeviceEndpoint(t *testing.T) {
	n, cfg := startNode(t, func(c *config.Config) {
		c.HTTP.Token = "dev-t0ken"
		c.Groups = append(c.Groups, config.Group{Subject: "telemetry.>", Queue: "archive", Deliver: "all"})
	})
	h := n.API().Handler()
	ctx := context.Background()
	for i := 1; i <= 30; i++ {
		payload := fmt.Appendf(nil, `{"i":%d}`, i)
		if i == 29 {
			payload = []byte{0xff, 0xfe, 0x00}
		}
		if i == 30 {
			payload = []byte(strings.Repeat("é", httpapi.DevicePayloadMax)) // 2 bytes a rune: cut inside one
		}
		if _, err := n.Ingest().Append(ctx, &wal.Record{Device: "meter-9", Source: "test", Payload: payload,
			Headers: []wal.Header{{Key: "Site", Value: "hall-2"}}}); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, n, "other", 50)

	if code, _ := getDevice(t, h, "/v1/devices/meter-9", ""); code != http.StatusUnauthorized {
		t.Fatalf("without token: %d", code)
	}
	code, v := getDevice(t, h, "/v1/devices/meter-9?n=5", "dev-t0ken")
	if code != 200 || !v.Known || v.LastSeq != 30 || v.Partition != wal.PartitionFor("meter-9", cfg.WAL.Partitions) || len(v.Records) != 5 || !v.Complete {
		t.Fatalf("view %d %+v", code, v)
	}
	for i, r := range v.Records {
		if r.Seq != uint64(30-i) || r.Kind != "data" || r.Source != "test" || r.Headers["Site"] != "hall-2" {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if r := v.Records[0]; !r.Truncated || r.Size != 2*httpapi.DevicePayloadMax || !strings.HasPrefix(r.Payload, "éé") || strings.ContainsRune(r.Payload, '\uFFFD') {
		t.Fatalf("long payload: truncated %v size %d, %d bytes of text", r.Truncated, r.Size, len(r.Payload))
	}
	if r := v.Records[1]; r.Payload != "" || string(r.PayloadBase64) != "\xff\xfe\x00" {
		t.Fatalf("binary payload: %+v", r)
	}
	if r := v.Records[2]; r.Payload != `{"i":28}` {
		t.Fatalf("text payload: %+v", r)
	}
	// The declared group has committed nothing: all five shown are behind.
	if len(v.Groups) != 1 || v.Groups[0].Queue != "archive" || v.Groups[0].Behind != 5 || v.Groups[0].DoneSeq != 0 {
		t.Fatalf("groups %+v", v.Groups)
	}
	if code, v := getDevice(t, h, "/v1/devices/never-seen", "dev-t0ken"); code != 200 || v.Known || len(v.Records) != 0 {
		t.Fatalf("unknown device: %d %+v", code, v)
	}
	for _, path := range []string{"/v1/devices/bad%20id", "/v1/devices/meter-9?n=0", "/v1/devices/meter-9?n=51", "/v1/devices/meter-9?n=x",
		"/v1/devices/" + strings.Repeat("a", wal.MaxDeviceIDLen+1)} {
		if code, _ := getDevice(t, h, path, "dev-t0ken"); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", path, code)
		}
	}
}

// TestEventsStream: /v1/events sends /v1/status documents as Server-Sent
// Events and counts its streams in /metrics; shutting the node down ends
// the stream instead of waiting for it.
func TestEventsStream(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.HTTP.EventsInterval = 250 * time.Millisecond })
	resp, err := http.Get("http://" + n.HTTPAddr() + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	var docs []apiv1.Status
	for len(docs) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var st apiv1.Status
			if err := json.Unmarshal([]byte(data), &st); err != nil {
				t.Fatalf("event: %v: %s", err, data)
			}
			docs = append(docs, st)
		}
	}
	if docs[0].Node != "metrics-test" || !docs[1].Time.After(docs[0].Time) || len(docs[1].Partitions) == 0 {
		t.Fatalf("events %+v", docs)
	}
	if v := values(t, n); v["edgeq_console_streams"] != 1 || v["edgeq_console_max_streams"] != 8 || v["edgeq_console_snapshots_total"] < 2 {
		t.Fatalf("console metrics: streams %v max %v snapshots %v", v["edgeq_console_streams"], v["edgeq_console_max_streams"], v["edgeq_console_snapshots_total"])
	}
	start := time.Now()
	if err := n.Shutdown(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown with a stream open took %v", d)
	}
}
