package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"

	"edgeq/gateway/apiv1"
	"edgeq/wal"
)

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
func (s *Server) handlePublish(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if err := wal.ValidateDeviceID(device); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := s.cfg.MaxPayload
	if r.ContentLength > limit {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("payload of %d bytes over the limit of %d (nats.max_payload)", r.ContentLength, limit))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if int64(len(body)) > limit {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("payload over %d bytes (nats.max_payload)", limit))
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
	pos, err := s.cfg.Ingest.Append(r.Context(), rec)
	if err != nil {
		writeError(w, publishStatus(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, apiv1.PublishResponse{Node: s.cfg.NodeID, Partition: pos.Partition, Offset: pos.Offset, Seq: pos.Seq})
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
