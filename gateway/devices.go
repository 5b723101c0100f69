package gateway

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"edgeq/gateway/console"
	"edgeq/wal"
)

// Bounds of GET /v1/devices/{device}: records returned, and what one lookup
// may read of each partition the device was stored in.
const (
	deviceRecordsDefault = 10
	deviceRecordsMax     = 50
	deviceScanBytes      = 1 << 20
	devicePayloadMax     = 4 << 10 // longer payloads are cut (the length is given)
)

// statusFrame is one /v1/events frame: the /v1/status document.
func (n *Node) statusFrame() ([]byte, error) {
	b, err := json.Marshal(n.Status())
	if err != nil {
		return nil, err
	}
	return console.Frame("status", b), nil
}

// DeviceView is the answer to GET /v1/devices/{device}.
type DeviceView struct {
	Device string `json:"device"`
	// Known: the log holds (or held) records of the device on this node.
	Known bool `json:"known"`
	// Partition is where its next record goes; Home the partition it
	// hashes to (they differ while it is isolated as hot).
	Partition int    `json:"partition"`
	Home      int    `json:"home_partition"`
	LastSeq   uint64 `json:"last_seq"`
	Moves     uint64 `json:"moves"`
	// Rate is msgs/s over the hot-detection window (absent when the
	// detector does not track the device: isolation off, or idle).
	Rate     *float64 `json:"rate,omitempty"`
	Isolated bool     `json:"isolated"`
	// Groups says, per queue group this node delivers, how far behind it
	// is in the device's partitions.
	Groups []DeviceGroup `json:"groups"`
	// Records are the device's newest records, newest first.
	Records []DeviceRecord `json:"records"`
	// Scanned counts what the lookup read; Complete is false when the
	// byte budget ran out before the requested records were found.
	ScannedRecords int  `json:"scanned_records"`
	ScannedBytes   int  `json:"scanned_bytes"`
	Complete       bool `json:"complete"`
}

// DeviceGroup is one group's position in the device's partitions.
type DeviceGroup struct {
	Filter string `json:"filter"`
	Queue  string `json:"queue"`
	// Committed is the group's committed offset by partition; Lag what the
	// group has not finished of each partition (all devices).
	Committed    map[string]uint64 `json:"committed"`
	PartitionLag map[string]uint64 `json:"partition_lag"`
	// Behind counts the returned records of this device the group has not
	// finished (committed); DoneSeq is the newest of them it has.
	Behind  int    `json:"behind"`
	DoneSeq uint64 `json:"done_seq"`
}

// DeviceRecord is one stored record.
type DeviceRecord struct {
	Partition int               `json:"partition"`
	Offset    uint64            `json:"offset"`
	Kind      string            `json:"kind"`
	Seq       uint64            `json:"seq"`
	Time      time.Time         `json:"time"`
	Source    string            `json:"source"`
	Headers   map[string]string `json:"headers,omitempty"`
	Size      int               `json:"size"`
	// Payload is the payload as text when it is UTF-8, else PayloadBase64
	// is set; both are cut at devicePayloadMax (Truncated).
	Payload       string `json:"payload,omitempty"`
	PayloadBase64 []byte `json:"payload_base64,omitempty"`
	Truncated     bool   `json:"truncated,omitempty"`
	MoveTarget    *int   `json:"move_target,omitempty"`
}

// handleDevice serves GET /v1/devices/{device}[?n=N]: what the node knows of
// one device and its last N records read from the log (read-only; bounded
// in records and bytes scanned per partition).
func (n *Node) handleDevice(w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	if err := wal.ValidateDeviceID(device); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	limit := deviceRecordsDefault
	if q := r.URL.Query().Get("n"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 || v > deviceRecordsMax {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "n: want 1.." + strconv.Itoa(deviceRecordsMax)})
			return
		}
		limit = v
	}
	view := DeviceView{Device: device, Groups: []DeviceGroup{}, Records: []DeviceRecord{}, Complete: true}
	info, known := n.log.Device(device)
	view.Known = known
	view.Partition, view.Home = n.log.DevicePartition(device), n.log.HomePartition(device)
	if known {
		view.Partition, view.Home, view.LastSeq, view.Moves = info.Partition, info.Home, info.LastSeq, info.Moves
	}
	if in := n.ingest; in.hot != nil {
		in.hotMu.Lock()
		dr, ok := in.hot.Lookup(device)
		in.hotMu.Unlock()
		if ok {
			view.Rate, view.Isolated = &dr.Rate, dr.Hot
		}
	}
	view.Isolated = view.Isolated || view.Partition != view.Home
	// The device's records are in its home partition and, once it moved, in
	// its hot partition too.
	parts := []int{view.Partition}
	if view.Moves > 0 || view.Partition != view.Home {
		for _, p := range []int{view.Home, n.log.HotPartition(device)} {
			if p >= 0 && p != view.Partition {
				parts = append(parts, p)
			}
		}
	}
	recs := []DeviceRecord{}
	if known {
		for _, p := range parts {
			es, scan, err := n.log.DeviceTail(p, device, limit, deviceScanBytes)
			if err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
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
	slices.SortStableFunc(recs, func(a, b DeviceRecord) int {
		if a.Seq != b.Seq {
			return cmp.Compare(b.Seq, a.Seq)
		}
		return cmp.Compare(boolInt(a.Kind == "move"), boolInt(b.Kind == "move")) * -1
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	view.Records = recs
	snap := n.snapshot(0, false)
	for _, g := range snap.Groups {
		if !g.Leading {
			continue
		}
		dg := DeviceGroup{Filter: g.Key.Filter, Queue: g.Key.Queue, Committed: map[string]uint64{}, PartitionLag: map[string]uint64{}}
		committed, durable := map[int]uint64{}, map[int]uint64{}
		for _, p := range g.Core.Partitions {
			ref, remote := g.Partitions[p.Partition]
			if remote && ref.Node != n.id {
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

func deviceRecord(p int, e *wal.Entry) DeviceRecord {
	rec := &e.Record
	d := DeviceRecord{Partition: p, Offset: e.Offset, Kind: rec.Kind.String(), Seq: rec.Seq,
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
	if len(payload) > devicePayloadMax {
		// Cut at a rune boundary, so that UTF-8 text stays text.
		cut := devicePayloadMax
		for cut > devicePayloadMax-utf8.UTFMax && !utf8.RuneStart(payload[cut]) {
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
