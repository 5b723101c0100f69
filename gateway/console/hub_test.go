package console

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// counting returns an encoder that numbers its snapshots.
func counting() (func() ([]byte, error), *atomic.Int64) {
	var n atomic.Int64
	return func() ([]byte, error) {
		return Frame("status", fmt.Appendf(nil, `{"n":%d}`, n.Add(1))), nil
	}, &n
}

func frameNum(f string) int64 {
	var n int64
	fmt.Sscanf(strings.TrimPrefix(f, "event: status\ndata: "), `{"n":%d}`, &n)
	return n
}

func next(t *testing.T, s *Stream) string {
	t.Helper()
	select {
	case f, ok := <-s.Frames():
		if !ok {
			t.Fatal("stream closed")
		}
		return string(f)
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10s")
	}
	return ""
}

// TestHubSharesOneSnapshot: every open stream gets the same frames from
// one computation per interval; nothing is computed while none is open.
func TestHubSharesOneSnapshot(t *testing.T) {
	enc, computed := counting()
	h := NewHub(enc, 20*time.Millisecond, 4)
	defer h.Close()
	time.Sleep(50 * time.Millisecond)
	if computed.Load() != 0 {
		t.Fatalf("%d snapshots with no stream open", computed.Load())
	}
	a, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	next(t, a) // computed for it at once
	b, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	// b starts from the newest frame; from then on both read the same
	// frames: one computation serves both.
	start, began := computed.Load(), time.Now()
	fb := next(t, b)
	for i := 0; i < 10; i++ {
		fa := next(t, a)
		if i > 0 {
			fb = next(t, b)
		}
		for frameNum(fa) < frameNum(fb) {
			fa = next(t, a)
		}
		for frameNum(fb) < frameNum(fa) {
			fb = next(t, b)
		}
	}
	// One computation per tick serves both streams (one per stream would
	// be twice the ticks); a reader slowed by a loaded machine does not
	// change the ticks, only how many frames it skips.
	got, ticks := computed.Load()-start, int64(time.Since(began)/(20*time.Millisecond))
	if got > ticks+3 {
		t.Fatalf("%d snapshots in %d ticks for frames read by each of two streams", got, ticks)
	}
	before := computed.Load()
	a.Close()
	b.Close()
	// The loop notices at its next tick, and then computes nothing: wait
	// for a quiet spell of 5 intervals (it never comes if it keeps on).
	for deadline, last, since := time.Now().Add(10*time.Second), computed.Load(), time.Now(); time.Since(since) < 100*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("still computing 10s after the last stream closed: %d snapshots", computed.Load())
		}
		time.Sleep(5 * time.Millisecond)
		if c := computed.Load(); c != last {
			last, since = c, time.Now()
		}
	}
	if st := h.Stats(); st.Streams != 0 || st.Opened != 2 || st.Snapshots < uint64(before) {
		t.Fatalf("stats %+v (computed %d)", st, before)
	}
}

// TestHubBoundAndSlowReader: streams beyond the bound are refused and
// counted; a reader that does not read holds one frame, the newest, and the
// others are not held up.
func TestHubBoundAndSlowReader(t *testing.T) {
	enc, computed := counting()
	h := NewHub(enc, 10*time.Millisecond, 2)
	slow, _ := h.Subscribe()
	fast, _ := h.Subscribe()
	if _, err := h.Subscribe(); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("third stream: %v", err)
	}
	for i := 0; i < 20; i++ {
		next(t, fast)
	}
	if h.Stats().Skipped == 0 {
		t.Fatal("no frame skipped for a reader that never read")
	}
	// The slow reader's one frame is recent, not its first (the count is
	// read first: the loop goes on computing while this goroutine runs).
	c := computed.Load()
	got := next(t, slow)
	if n := frameNum(got); n < c-3 {
		t.Fatalf("slow reader got snapshot %d of %d", n, c)
	}
	if st := h.Stats(); st.Refused != 1 || st.Streams != 2 || st.MaxStreams != 2 {
		t.Fatalf("stats %+v", st)
	}
	h.Close()
	for _, s := range []*Stream{slow, fast} {
		deadline := time.After(10 * time.Second)
		for open := true; open; {
			select {
			case _, open = <-s.Frames():
			case <-deadline:
				t.Fatal("stream not closed by Close")
			}
		}
	}
	if _, err := h.Subscribe(); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

// TestServeEvents: the handler speaks Server-Sent Events, answers 503
// beyond the bound, and ends the stream when the hub closes.
func TestServeEvents(t *testing.T) {
	enc, _ := counting()
	h := NewHub(enc, 20*time.Millisecond, 1)
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	var events int
	for events < 3 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {\"n\":") {
			events++
		}
	}
	second, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %d", second.StatusCode)
	}
	h.Close()
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := r.ReadString('\n'); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stream still open after Close")
	}
}

func TestPageFiles(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/console", Page()))
	defer srv.Close()
	for _, f := range []string{"/console/", "/console/app.js", "/console/app.css"} {
		resp, err := http.Get(srv.URL + f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("%s: %d, CSP %q", f, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	}
	if n := Size(); n < 10_000 || n > 100_000 {
		t.Fatalf("console is %d bytes", n)
	}
	// Compressed for a browser that accepts gzip: the same bytes and type.
	for _, f := range []string{"/console/", "/console/app.js", "/console/app.css"} {
		plain, plainHd := fetch(t, srv.URL+f, "identity")
		zipped, hd := fetch(t, srv.URL+f, "gzip")
		if hd.Get("Content-Encoding") != "gzip" || plainHd.Get("Content-Encoding") != "" {
			t.Fatalf("%s: encodings %q and %q", f, hd.Get("Content-Encoding"), plainHd.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		if err != nil {
			t.Fatal(err)
		}
		unpacked, _ := io.ReadAll(zr)
		if !bytes.Equal(unpacked, plain) || hd.Get("Content-Type") != plainHd.Get("Content-Type") || len(zipped) >= len(plain) {
			t.Fatalf("%s: gzip %d bytes unpacking to %d (%s), plain %d (%s)", f, len(zipped), len(unpacked), hd.Get("Content-Type"), len(plain), plainHd.Get("Content-Type"))
		}
	}
}

// fetch GETs url with the given Accept-Encoding, the body as sent.
func fetch(t *testing.T, url, enc string) ([]byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept-Encoding", enc)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b, resp.Header
}
