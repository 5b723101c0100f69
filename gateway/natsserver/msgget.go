package natsserver

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/wal"
)

// Message get: STREAM.MSG.GET.<stream> answers JSON with the message's
// header block and payload in base64; DIRECT.GET.<stream> (a request body)
// and DIRECT.GET.<stream>.<subject> (the last message of the subject)
// answer the message itself with Nats-Stream, Nats-Subject, Nats-Sequence
// and Nats-Time-Stamp headers, or a 404 status, as nats-server does. The
// headers are those a delivery carries (Edgeq-*, then the record's own).

type storedMsg struct {
	Subject  string    `json:"subject"`
	Sequence uint64    `json:"seq"`
	Header   []byte    `json:"hdrs,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	Time     time.Time `json:"time"`
}

func (c *conn) handleMsgGet(stream, reply string, body []byte) {
	js := c.s.cfg.JetStream
	if reply == "" {
		return
	}
	const typ = "stream_msg_get_response"
	req, e := jsapi.ParseMsgGet(body, "")
	var f jsapi.Found
	if e == nil {
		f, e = js.GetMsg(stream, req)
	}
	if e != nil {
		js.Errors.Add(1)
		c.s.publishCore(nil, reply, "", nil, jsapi.ErrorJSON(typ, e))
		return
	}
	rec := &f.Entry.Record
	d := groups.Delivery{Record: rec, Node: c.s.cfg.NodeID, Partition: f.Partition, Offset: f.Entry.Offset}
	out, err := json.Marshal(struct {
		Type    string    `json:"type"`
		Message storedMsg `json:"message"`
	}{"io.nats.jetstream.api.v1." + typ, storedMsg{Subject: f.Subject, Sequence: f.Seq, Header: appendDeliveryHeader(nil, &d),
		Data: rec.Payload, Time: time.Unix(0, rec.Time).UTC()}})
	if err != nil {
		out = jsapi.ErrorJSON(typ, jsapi.Err(500, jsapi.CodeBadRequest, "encode: %v", err))
	}
	c.s.publishCore(nil, reply, "", nil, out)
}

// handleDirectGet answers DIRECT.GET.<rest>; rest is <stream> or
// <stream>.<subject>.
func (c *conn) handleDirectGet(rest, reply string, body []byte) {
	js := c.s.cfg.JetStream
	if reply == "" {
		return
	}
	stream, subject, _ := strings.Cut(rest, ".")
	req, e := jsapi.ParseMsgGet(body, subject)
	if e != nil {
		js.Errors.Add(1)
		c.s.sendStatus(reply, 408, "Bad Request", 0, 0)
		return
	}
	f, e := js.GetMsg(stream, req)
	if e != nil {
		js.Errors.Add(1)
		if e.ErrorCode == jsapi.CodeStreamNotFound {
			// nats-server: nobody answers a stream that is not there.
			c.s.publishCore(nil, reply, "", noResponders, nil)
			return
		}
		c.s.sendStatus(reply, 404, "Message Not Found", 0, 0)
		return
	}
	rec := &f.Entry.Record
	d := groups.Delivery{Record: rec, Node: c.s.cfg.NodeID, Partition: f.Partition, Offset: f.Entry.Offset}
	h := appendDeliveryHeader(nil, &d,
		wal.Header{Key: "Nats-Stream", Value: f.Stream}, wal.Header{Key: "Nats-Subject", Value: f.Subject},
		wal.Header{Key: "Nats-Sequence", Value: strconv.FormatUint(f.Seq, 10)},
		wal.Header{Key: "Nats-Time-Stamp", Value: time.Unix(0, rec.Time).UTC().Format(time.RFC3339Nano)})
	c.s.publishCore(nil, reply, "", h, rec.Payload)
}
