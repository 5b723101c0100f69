package cluster

import (
	"reflect"
	"testing"

	"edgeq/discovery/election"
)

var sampleGroup = GroupName{Filter: "telemetry.>", Queue: "uploader"}
var sampleEpoch = election.Epoch{N: 42, Leader: "gw-a"}

// wireCase encodes one message and decodes it back into the same type.
type wireCase struct {
	name   string
	msg    any
	encode func() []byte
	decode func([]byte) (any, error)
}

func wireCases() []wireCase {
	pos := &PositionReq{ID: 7, Group: sampleGroup, Epoch: sampleEpoch, DeliverAll: true}
	posResp := &PositionResp{ID: 7, Next: []uint64{1, 812, 1 << 40}}
	posErr := &PositionResp{ID: 8, Err: "stale epoch"}
	fetch := &FetchReq{ID: 9, Group: sampleGroup, Epoch: sampleEpoch, Partition: 3, From: 812, MaxMsgs: 1024, MaxBytes: 1 << 20, WaitMillis: 5000}
	fetched := &FetchResp{ID: 9, Next: 815, Durable: 900, Records: []RawRecord{{Offset: 812, Raw: []byte("abc")}, {Offset: 814, Raw: []byte{0, 1, 2, 255}}}}
	commit := &CommitReq{ID: 10, Group: sampleGroup, Epoch: sampleEpoch, Sync: true, Offsets: []PartitionOffset{{0, 5}, {9, 1 << 33}}}
	committed := &CommitResp{ID: 10, Err: ""}
	fwd := &Forward{Group: sampleGroup, Member: "gw-b/7f3a/c4-1", Instance: 17, CorePartition: 2051, Node: "gw-c",
		Partition: 3, Offset: 77, Deliveries: 1, Maybe: true, Record: []byte{1, 1, 0xde, 0xad, 0xbe, 0xef, 8, 's', 'e', 'n', 's', 'o', 'r', '1'}}
	dead := &Forward{Group: sampleGroup, Reason: "max_deliver", Instance: 17, Node: "gw-c", Partition: 3, Offset: 78, Deliveries: 5, Record: []byte("rec")}
	ack := &AckRelay{Instance: 17, Member: "gw-b/7f3a/c4-1", CorePartition: 2051, Offset: 77, Deliveries: 2, Kind: 2, Delay: 5000000000}
	members := &Members{Group: sampleGroup, Declared: true, Members: []MemberInfo{{ID: "gw-b/7f3a/c4-1", Credit: 256}, {ID: "gw-b/7f3a/c5-1", Credit: 0}}}
	return []wireCase{
		{"position", pos, func() []byte { return AppendPositionReq(nil, pos) }, func(b []byte) (any, error) { m, err := DecodePositionReq(b); return &m, err }},
		{"positioned", posResp, func() []byte { return AppendPositionResp(nil, posResp) }, func(b []byte) (any, error) { m, err := DecodePositionResp(b); return &m, err }},
		{"positioned error", posErr, func() []byte { return AppendPositionResp(nil, posErr) }, func(b []byte) (any, error) { m, err := DecodePositionResp(b); return &m, err }},
		{"fetch", fetch, func() []byte { return AppendFetchReq(nil, fetch) }, func(b []byte) (any, error) { m, err := DecodeFetchReq(b); return &m, err }},
		{"fetched", fetched, func() []byte { return AppendFetchResp(nil, fetched) }, func(b []byte) (any, error) { m, err := DecodeFetchResp(b); return &m, err }},
		{"commit", commit, func() []byte { return AppendCommitReq(nil, commit) }, func(b []byte) (any, error) { m, err := DecodeCommitReq(b); return &m, err }},
		{"committed", committed, func() []byte { return AppendCommitResp(nil, committed) }, func(b []byte) (any, error) { m, err := DecodeCommitResp(b); return &m, err }},
		{"forward", fwd, func() []byte { return AppendForward(nil, fwd) }, func(b []byte) (any, error) { m, err := DecodeForward(b); return &m, err }},
		{"dead letter", dead, func() []byte { return AppendForward(nil, dead) }, func(b []byte) (any, error) { m, err := DecodeForward(b); return &m, err }},
		{"ack", ack, func() []byte { return AppendAckRelay(nil, ack) }, func(b []byte) (any, error) { m, err := DecodeAckRelay(b); return &m, err }},
		{"members", members, func() []byte { return AppendMembers(nil, members) }, func(b []byte) (any, error) { m, err := DecodeMembers(b); return &m, err }},
	}
}

func TestWireRoundTripAndTruncation(t *testing.T) {
	for _, tc := range wireCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.encode()
			got, err := tc.decode(b)
			if err != nil || !reflect.DeepEqual(got, tc.msg) {
				t.Fatalf("round trip: %+v, %v; want %+v", got, err, tc.msg)
			}
			for n := 0; n < len(b); n++ {
				if _, err := tc.decode(b[:n]); err == nil {
					t.Fatalf("truncated to %d of %d bytes: decoded", n, len(b))
				}
			}
			if _, err := tc.decode(append(b, 0)); err == nil {
				t.Fatal("a trailing byte was accepted")
			}
		})
	}
}

func TestWireLimits(t *testing.T) {
	huge := &PositionResp{ID: 1, Next: make([]uint64, maxPartitions+1)}
	if _, err := DecodePositionResp(AppendPositionResp(nil, huge)); err == nil {
		t.Fatal("more partitions than the limit accepted")
	}
	many := &Members{Group: sampleGroup, Members: make([]MemberInfo, maxMembersInMsg+1)}
	if _, err := DecodeMembers(AppendMembers(nil, many)); err == nil {
		t.Fatal("more members than the limit accepted")
	}
	long := &Forward{Group: sampleGroup, Member: string(make([]byte, maxMemberID+1))}
	if _, err := DecodeForward(AppendForward(nil, long)); err == nil {
		t.Fatal("an over-long member ID accepted")
	}
	// A count that claims more elements than there are bytes must not
	// allocate for the claim.
	b := AppendFetchResp(nil, &FetchResp{ID: 1})
	b = b[:len(b)-1]
	b = append(b, 0xff, 0xff, 0x03) // 65535 records, none present
	if _, err := DecodeFetchResp(b); err == nil {
		t.Fatal("a record count without records accepted")
	}
}

// FuzzDecodeWire: every decoder, on any input, returns an error or a message
// that re-encodes to something decoding to the same message.
func FuzzDecodeWire(f *testing.F) {
	cases := wireCases()
	for i, tc := range cases {
		f.Add(uint8(i), tc.encode())
	}
	f.Add(uint8(4), []byte{1, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		tc := cases[int(which)%len(cases)]
		msg, err := tc.decode(b)
		if err != nil {
			return
		}
		var again []byte
		switch m := msg.(type) {
		case *PositionReq:
			again = AppendPositionReq(nil, m)
		case *PositionResp:
			again = AppendPositionResp(nil, m)
		case *FetchReq:
			again = AppendFetchReq(nil, m)
		case *FetchResp:
			again = AppendFetchResp(nil, m)
		case *CommitReq:
			again = AppendCommitReq(nil, m)
		case *CommitResp:
			again = AppendCommitResp(nil, m)
		case *Forward:
			again = AppendForward(nil, m)
		case *AckRelay:
			again = AppendAckRelay(nil, m)
		case *Members:
			again = AppendMembers(nil, m)
		default:
			t.Fatalf("unexpected type %T", msg)
		}
		msg2, err := tc.decode(again)
		if err != nil || !reflect.DeepEqual(normalize(msg2), normalize(msg)) {
			t.Fatalf("re-encoded %s decodes as %+v, %v; want %+v", tc.name, msg2, err, msg)
		}
	})
}

// normalize treats empty and nil byte slices alike.
func normalize(m any) any {
	switch v := m.(type) {
	case *Forward:
		c := *v
		if len(c.Record) == 0 {
			c.Record = nil
		}
		return &c
	case *FetchResp:
		c := *v
		c.Records = append([]RawRecord(nil), v.Records...)
		for i := range c.Records {
			if len(c.Records[i].Raw) == 0 {
				c.Records[i].Raw = nil
			}
		}
		return &c
	}
	return m
}
