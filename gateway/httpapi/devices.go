package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"edgeq/gateway/apiv1"
	"edgeq/wal"
)

// Bounds of GET /v1/devices/{device}: records returned, and what one lookup
// may read of each partition the device was stored in.
const (
	deviceRecordsDefault = 10
	deviceRecordsMax     = 50
	deviceScanBytes      = 1 << 20
	DevicePayloadMax     = 4 << 10 // longer payloads are cut (the length is given)
)

// handleDevice serves GET /v1/devices/{device}[?n=N]: what the node knows of
// one device and its last N records read from the log (read-only; bounded
// in records and bytes scanned per partition).
func (s *Server) handleDevice(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if err := wal.ValidateDeviceID(device); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := deviceRecordsDefault
	if q := r.URL.Query().Get("n"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 || v > deviceRecordsMax {
			writeError(w, http.StatusBadRequest, "n: want 1.."+strconv.Itoa(deviceRecordsMax))
			return
		}
		limit = v
	}
	view := apiv1.DeviceView{Device: device, Groups: []apiv1.DeviceGroup{}, Records: []apiv1.DeviceRecord{}, Complete: true}
	log := s.cfg.Log
	info, known := log.Device(device)
	view.Known = known
	view.Partition, view.Home = log.DevicePartition(device), log.HomePartition(device)
	if known {
		view.Partition, view.Home, view.LastSeq, view.Moves = info.Partition, info.Home, info.LastSeq, info.Moves
	}
	if dr, ok := s.node.HotDevice(device); ok {
		view.Rate, view.Isolated = &dr.Rate, dr.Hot
	}
	view.Isolated = view.Isolated || view.Partition != view.Home
	// The device's records are in its home partition and, once it moved, in
	// its hot partition too.
	parts := []int{view.Partition}
	if view.Moves > 0 || view.Partition != view.Home {
		for _, p := range []int{view.Home, log.HotPartition(device)} {
			if p >= 0 && p != view.Partition {
				parts = append(parts, p)
			}
		}
	}
	recs := []apiv1.DeviceRecord{}
	if known {
		for _, p := range parts {
			es, scan, err := log.DeviceTail(p, device, limit, deviceScanBytes)
			if err != nil {
				writeError(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			view.ScannedRecords += scan.Records
			view.ScannedBytes += scan.Bytes
			view.Complete = view.Complete && scan.Complete
			for i := range es {
				recs = append(recs, deviceRecord(p, &es[i]))
			}
		}
	}
	// Newest first across partitions: the per-device seq orders them; a
	// move marker carries the seq of the record before it, and follows it.
	slices.SortStableFunc(recs, func(a, b apiv1.DeviceRecord) int {
		if a.Seq != b.Seq {
			return cmp.Compare(b.Seq, a.Seq)
		}
		return cmp.Compare(boolInt(a.Kind == "move"), boolInt(b.Kind == "move")) * -1
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	view.Records = recs
	snap := s.node.Snapshot(0, false)
	for _, g := range snap.Groups {
		if !g.Leading {
			continue
		}
		dg := apiv1.DeviceGroup{Filter: g.Key.Filter, Queue: g.Key.Queue, Committed: map[string]uint64{}, PartitionLag: map[string]uint64{}}
		committed, durable := map[int]uint64{}, map[int]uint64{}
		for _, p := range g.Core.Partitions {
			ref, remote := g.Partitions[p.Partition]
			if remote && ref.Node != s.cfg.NodeID {
				continue
			}
			local := p.Partition
			if remote {
				local = ref.Partition
			}
			committed[local] = p.Committed
			if d, ok := g.Durable[p.Partition]; ok {
				durable[local] = d // read with committed: the lag at one moment
			}
		}
		for _, p := range parts {
			c, ok := committed[p]
			if !ok {
				continue
			}
			name := strconv.Itoa(p)
			dg.Committed[name] = c
			if d, ok := durable[p]; ok {
				dg.PartitionLag[name] = max(d, c) - c
			} else {
				dg.PartitionLag[name] = snap.PartitionLag(p, c)
			}
		}
		for _, rec := range recs {
			if rec.Kind != wal.KindData.String() {
				continue
			}
			if c, ok := committed[rec.Partition]; ok && rec.Offset <= c {
				dg.DoneSeq = max(dg.DoneSeq, rec.Seq)
			} else {
				dg.Behind++
			}
		}
		view.Groups = append(view.Groups, dg)
	}
	writeJSON(w, http.StatusOK, view)
}

func deviceRecord(p int, e *wal.Entry) apiv1.DeviceRecord {
	rec := &e.Record
	d := apiv1.DeviceRecord{Partition: p, Offset: e.Offset, Kind: rec.Kind.String(), Seq: rec.Seq,
		Time: time.Unix(0, rec.Time).UTC(), Source: rec.Source, Size: len(rec.Payload)}
	if len(rec.Headers) > 0 {
		d.Headers = make(map[string]string, len(rec.Headers))
		for _, h := range rec.Headers {
			d.Headers[h.Key] = h.Value
		}
	}
	if rec.Kind == wal.KindMove {
		t := rec.MoveTarget
		d.MoveTarget = &t
		return d
	}
	payload := rec.Payload
	if len(payload) > DevicePayloadMax {
		// Cut at a rune boundary, so that UTF-8 text stays text.
		cut := DevicePayloadMax
		for cut > DevicePayloadMax-utf8.UTFMax && !utf8.RuneStart(payload[cut]) {
			cut--
		}
		payload, d.Truncated = payload[:cut], true
	}
	if utf8.Valid(payload) {
		d.Payload = string(payload)
	} else {
		d.PayloadBase64 = append([]byte(nil), payload...)
	}
	return d
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
