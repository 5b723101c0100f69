package uplink

import (
	"bytes"
	"testing"

	"edgeq/gateway/groups"
	"edgeq/wal"
)

// TestDeliverCopiesWhatItKeeps: a record decoded in place from a buffer its
// caller reuses as soon as Deliver returns (a peer connection's frame
// buffer) must not change in the uplink: device, source, headers, payload
// and the message ID upstream stay those of the delivery.
func TestDeliverCopiesWhatItKeeps(t *testing.T) {
	rec := wal.Record{Kind: wal.KindData, Device: "dev-a", Seq: 42, Time: 7, Source: "mqtt",
		Headers: []wal.Header{{Key: "unit", Value: "C"}}, Payload: []byte(`{"t":1}`)}
	frame := wal.AppendRecord(nil, &rec)
	var dec wal.Record
	if err := wal.DecodeRecord(frame, &dec); err != nil {
		t.Fatal(err)
	}
	node := []byte("gw-b")
	u := New(testConfig(), &fakeTransport{}, &fakeAcker{}, quiet, nil)
	d := &groups.Delivery{Record: &dec, Raw: frame, Node: string(node), Offset: 3, Deliveries: 1}
	if !u.Deliver(d) {
		t.Fatal("refused")
	}
	// The next frame overwrites the buffer (same lengths, other bytes).
	other := wal.AppendRecord(nil, &wal.Record{Kind: wal.KindData, Device: "dev-z", Seq: 42, Time: 7, Source: "http",
		Headers: []wal.Header{{Key: "xxxx", Value: "Y"}}, Payload: []byte(`{"t":9}`)})
	if len(other) != len(frame) {
		t.Fatalf("test frames differ in length: %d, %d", len(other), len(frame))
	}
	copy(frame, other)
	it := <-u.queue
	if it.Device != "dev-a" || it.Source != "mqtt" || it.MsgID() != "gw-b:dev-a:42" {
		t.Errorf("held record changed: device %q source %q msg id %q", it.Device, it.Source, it.MsgID())
	}
	if len(it.Headers) != 1 || it.Headers[0] != (wal.Header{Key: "unit", Value: "C"}) {
		t.Errorf("held headers changed: %+v", it.Headers)
	}
	if !bytes.Equal(it.Payload, []byte(`{"t":1}`)) {
		t.Errorf("held payload changed: %q", it.Payload)
	}
}
