package console

import (
	"bytes"
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// writeTimeout bounds one frame's write: a client that stops reading is
// dropped instead of holding its stream slot forever.
const writeTimeout = 10 * time.Second

// ServeHTTP streams the hub's frames as Server-Sent Events ("event: status",
// the JSON on one data line) until the client goes away or the hub closes.
// Beyond the stream bound it answers 503.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	s, err := h.Subscribe()
	if err != nil {
		code := http.StatusServiceUnavailable
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(code)
		msg := err.Error()
		if errors.Is(err, ErrTooManyStreams) {
			msg = fmt.Sprintf("too many open event streams (http.max_event_streams %d)", h.max)
		}
		fmt.Fprintf(w, "{\"error\":%q}\n", msg)
		return
	}
	defer s.Close()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// retry: how long EventSource-style clients wait before reconnecting.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case frame, ok := <-s.Frames():
			if !ok {
				return
			}
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := w.Write(frame); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// Frame encodes one SSE event of the given name around a JSON document that
// holds no newline (json.Marshal never writes one).
func Frame(event string, doc []byte) []byte {
	b := make([]byte, 0, len(event)+len(doc)+16)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, doc...)
	return append(b, "\n\n"...)
}

// Page serves the console's files: index.html at "/", the rest by name,
// gzip-compressed for browsers that accept it (compressed once, at the first
// request). The files carry no secret (the token is asked for by the page),
// so they are served without authentication; a policy keeps the page to its
// own origin.
func Page() http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	var once sync.Once
	var zipped map[string][]byte // by path under static/
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		hd.Add("Vary", "Accept-Encoding")
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name == "" {
			name = "index.html"
		}
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			once.Do(func() { zipped = compress(sub) })
			if z, ok := zipped[name]; ok {
				if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
					hd.Set("Content-Type", ct)
				}
				hd.Set("Content-Encoding", "gzip")
				hd.Set("Content-Length", strconv.Itoa(len(z)))
				if r.Method != http.MethodHead {
					_, _ = w.Write(z)
				}
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}

// compress gzips every file of fsys.
func compress(fsys fs.FS) map[string][]byte {
	out := map[string][]byte{}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		if zw.Close() == nil {
			out[p] = buf.Bytes()
		}
		return nil
	})
	return out
}

// Size is the total size of the console's files in bytes: what a browser
// loads (uncompressed).
func Size() int {
	n := 0
	_ = fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := static.ReadFile(path); err == nil {
				n += len(b)
			}
		}
		return nil
	})
	return n
}
