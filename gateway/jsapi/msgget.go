package jsapi

import (
	"encoding/json"
	"strings"

	"edgeq/wal"
)

// Message get (STREAM.MSG.GET and DIRECT.GET): one stored message by stream
// sequence, or a device's newest one by subject (last_by_subj). The
// encoding of the answer is the front end's; this finds the record.

// More JetStream error codes (nats-server's numbers).
const (
	CodeNoMessageFound = 10037 // JSNoMessageFoundErr
	CodeKVReadOnly     = 10003 // edgeq: the KV view refuses writes
)

var errNoMessage = Err(404, CodeNoMessageFound, "no message found")

// MsgGetRequest is the body of STREAM.MSG.GET and DIRECT.GET.
type MsgGetRequest struct {
	Seq        uint64   `json:"seq,omitempty"`
	LastBySubj string   `json:"last_by_subj,omitempty"`
	NextBySubj string   `json:"next_by_subj,omitempty"`
	Batch      int      `json:"batch,omitempty"`
	MultiLast  []string `json:"multi_last,omitempty"`
	StartTime  *string  `json:"start_time,omitempty"`
}

// Found is a message a get found.
type Found struct {
	Stream    string // the stream asked (TELEMETRY, or the KV view's KV_<bucket>)
	Subject   string // its subject in that stream
	Seq       uint64 // its stream sequence
	Partition int
	Entry     wal.Entry
}

// ParseMsgGet reads a get request's body; subjectLast is the subject of
// the DIRECT.GET.<stream>.<subject> form (empty otherwise).
func ParseMsgGet(body []byte, subjectLast string) (MsgGetRequest, *APIError) {
	var r MsgGetRequest
	if subjectLast != "" {
		if len(strings.TrimSpace(string(body))) > 0 {
			return r, Err(400, CodeBadRequest, "direct get of the last message for a subject takes no body")
		}
		r.LastBySubj = subjectLast
		return r, nil
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, Err(400, CodeInvalidJSON, "invalid JSON: %v", err)
	}
	switch {
	case r.NextBySubj != "" || r.Batch > 0 || len(r.MultiLast) > 0 || r.StartTime != nil:
		return r, Err(400, CodeNotSupported, "edgeq: message get supports seq and last_by_subj only (next_by_subj, batch, multi_last and start_time are not supported)")
	case r.Seq > 0 && r.LastBySubj != "":
		return r, Err(400, CodeBadRequest, "bad request: seq and last_by_subj are exclusive")
	case r.Seq == 0 && r.LastBySubj == "":
		return r, Err(400, CodeBadRequest, "bad request: give seq or last_by_subj")
	}
	return r, nil
}

// GetMsg finds the message req asks for in stream (the node's stream or its
// KV view).
func (s *Service) GetMsg(stream string, req MsgGetRequest) (Found, *APIError) {
	v, ok := s.view(stream)
	if !ok {
		return Found{}, errStreamNotFound
	}
	var p int
	var off uint64
	if req.LastBySubj != "" {
		device, ok := v.device(req.LastBySubj)
		if !ok {
			return Found{}, errNoMessage
		}
		pos, ok := s.last.Last(device)
		if !ok {
			return Found{}, errNoMessage
		}
		p, off = pos.Partition, pos.Offset
	} else {
		p, off, ok = s.locate(req.Seq)
		if !ok {
			return Found{}, errNoMessage
		}
	}
	if off < s.log.First(p) || off > s.log.Durable(p) {
		return Found{}, errNoMessage
	}
	b, err := s.log.Read(p, off, 1, 1)
	if err != nil || len(b.Entries) == 0 || b.Entries[0].Offset != off || b.Entries[0].Record.Kind != wal.KindData {
		return Found{}, errNoMessage
	}
	e := b.Entries[0]
	return Found{Stream: v.name, Subject: v.subject(e.Record.Device), Seq: s.seqOf(p, off), Partition: p, Entry: e}, nil
}

// The read side maps between stream sequences and the log through these
// three methods only (message get, ordered consumers, the last-value
// index's order), so that a change of numbering stays here.

// seqOf is the stream sequence of the record at (partition, offset).
func (s *Service) seqOf(partition int, offset uint64) uint64 { return StreamSeq(partition, offset) }

// startBySeq is where, per partition, a read from stream sequence seq on
// starts (the offset finished before it).
func (s *Service) startBySeq(seq uint64) func(partition int) uint64 { return StartBySeq(seq) }

// locate is where stream sequence seq is stored.
func (s *Service) locate(seq uint64) (partition int, offset uint64, ok bool) {
	p, off := SplitSeq(seq)
	if seq == 0 || off == 0 || p >= s.log.NumPartitions() {
		return 0, 0, false
	}
	return p, off, true
}

// LastIndex is the service's last-value index (its metrics, its Run).
func (s *Service) LastIndex() *LastIndex { return s.last }

// streamView is the log seen as one stream: the node's stream (subjects
// <prefix>.<device>) or the read-only KV view (KV_<bucket>, subjects
// $KV.<bucket>.<device>).
type streamView struct {
	name   string
	prefix string // subjects are prefix + "." + device
	kv     bool
}

func (v streamView) subject(device string) string { return v.prefix + "." + device }

// device is the device of a subject of the view; false if the subject is
// not one device's.
func (v streamView) device(subject string) (string, bool) {
	d, ok := strings.CutPrefix(subject, v.prefix+".")
	if !ok || wal.ValidateDeviceID(d) != nil {
		return "", false
	}
	return d, true
}

// match reads a filter subject of the view: every device, one device, or
// none (a filter outside the view, or one that cannot match a device).
func (v streamView) match(filter string) (all bool, device string, ok bool) {
	if filter == "" || filter == ">" {
		return true, "", true
	}
	rest, found := strings.CutPrefix(filter, v.prefix+".")
	if !found {
		return false, "", false
	}
	switch {
	case rest == ">" || rest == "*":
		return true, "", true
	case wal.ValidateDeviceID(rest) == nil:
		return false, rest, true
	}
	return false, "", false
}

// view returns the stream named name.
func (s *Service) view(name string) (streamView, bool) {
	switch {
	case name == s.cfg.Stream:
		return streamView{name: name, prefix: s.cfg.Prefix}, true
	case s.cfg.KVBucket != "" && name == KVStreamPrefix+s.cfg.KVBucket:
		return streamView{name: name, prefix: "$KV." + s.cfg.KVBucket, kv: true}, true
	}
	return streamView{}, false
}
