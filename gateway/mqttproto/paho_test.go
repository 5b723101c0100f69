package mqttproto

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// pahoPair is one 3.1.1 packet as paho.mqtt.golang's packets package builds
// it and as we build it.
type pahoPair struct {
	paho packets.ControlPacket
	ours Packet
}

func pahoPairs() []pahoPair {
	connect := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	connect.ProtocolName, connect.ProtocolVersion = "MQTT", 4
	connect.CleanSession, connect.Keepalive, connect.ClientIdentifier = true, 45, "paho-1"
	connect.WillFlag, connect.WillQos, connect.WillRetain = true, 2, true
	connect.WillTopic, connect.WillMessage = "telemetry/paho-1/status", []byte("offline")
	connect.UsernameFlag, connect.Username = true, "dev"
	connect.PasswordFlag, connect.Password = true, []byte("pw")

	persistent := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	persistent.ProtocolName, persistent.ProtocolVersion = "MQTT", 4
	persistent.Keepalive, persistent.ClientIdentifier = 0, "w"

	pub := func(qos byte, id uint16, dup, retain bool, topic, payload string) *packets.PublishPacket {
		p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
		p.Qos, p.MessageID, p.Dup, p.Retain, p.TopicName, p.Payload = qos, id, dup, retain, topic, []byte(payload)
		return p
	}
	ack := func(t byte, id uint16) packets.ControlPacket {
		p := packets.NewControlPacket(t)
		switch a := p.(type) {
		case *packets.PubackPacket:
			a.MessageID = id
		case *packets.PubrecPacket:
			a.MessageID = id
		case *packets.PubrelPacket:
			a.MessageID = id
		case *packets.PubcompPacket:
			a.MessageID = id
		case *packets.UnsubackPacket:
			a.MessageID = id
		}
		return p
	}
	sub := packets.NewControlPacket(packets.Subscribe).(*packets.SubscribePacket)
	sub.MessageID, sub.Topics, sub.Qoss = 3, []string{"telemetry/#", "$share/g/a/+"}, []byte{1, 2}
	unsub := packets.NewControlPacket(packets.Unsubscribe).(*packets.UnsubscribePacket)
	unsub.MessageID, unsub.Topics = 4, []string{"telemetry/#"}
	connack := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
	connack.SessionPresent, connack.ReturnCode = true, 0
	refused := packets.NewControlPacket(packets.Connack).(*packets.ConnackPacket)
	refused.ReturnCode = packets.ErrRefusedIDRejected
	suback := packets.NewControlPacket(packets.Suback).(*packets.SubackPacket)
	suback.MessageID, suback.ReturnCodes = 3, []byte{1, 0x80}

	return []pahoPair{
		{connect, Packet{Type: CONNECT, Connect: &Connect{CleanStart: true, KeepAlive: 45, ClientID: []byte("paho-1"),
			Will: true, WillQoS: 2, WillRetain: true, WillTopic: []byte("telemetry/paho-1/status"), WillPayload: []byte("offline"),
			HasUsername: true, Username: []byte("dev"), HasPassword: true, Password: []byte("pw")}}},
		{persistent, Packet{Type: CONNECT, Connect: &Connect{ClientID: []byte("w")}}},
		{pub(0, 0, false, false, "telemetry/d1", `{"t":1}`), Packet{Type: PUBLISH, Topic: []byte("telemetry/d1"), Payload: []byte(`{"t":1}`)}},
		{pub(1, 17, false, true, "telemetry/d2", "x"), Packet{Type: PUBLISH, QoS: 1, PacketID: 17, Retain: true, Topic: []byte("telemetry/d2"), Payload: []byte("x")}},
		{pub(2, 65535, true, false, "t/ü", ""), Packet{Type: PUBLISH, QoS: 2, PacketID: 65535, Dup: true, Topic: []byte("t/ü")}},
		{ack(packets.Puback, 17), Packet{Type: PUBACK, PacketID: 17}},
		{ack(packets.Pubrec, 18), Packet{Type: PUBREC, PacketID: 18}},
		{ack(packets.Pubrel, 18), Packet{Type: PUBREL, PacketID: 18}},
		{ack(packets.Pubcomp, 18), Packet{Type: PUBCOMP, PacketID: 18}},
		{sub, Packet{Type: SUBSCRIBE, PacketID: 3, Subs: []Subscription{{Filter: []byte("telemetry/#"), QoS: 1}, {Filter: []byte("$share/g/a/+"), QoS: 2}}}},
		{unsub, Packet{Type: UNSUBSCRIBE, PacketID: 4, Filters: [][]byte{[]byte("telemetry/#")}}},
		{packets.NewControlPacket(packets.Pingreq), Packet{Type: PINGREQ}},
		{packets.NewControlPacket(packets.Disconnect), Packet{Type: DISCONNECT}},
		{connack, Packet{Type: CONNACK, SessionPresent: true}},
		{refused, Packet{Type: CONNACK, Reason: ReasonCode(ConnRefusedIdentifier311)}},
		{suback, Packet{Type: SUBACK, PacketID: 3, ReasonCodes: []byte{1, 0x80}}},
		{ack(packets.Unsuback, 4), Packet{Type: UNSUBACK, PacketID: 4}},
		{packets.NewControlPacket(packets.Pingresp), Packet{Type: PINGRESP}},
	}
}

// TestPahoEncodesAsWeDo cross-checks 3.1.1 against paho.mqtt.golang: both
// encoders write the same bytes, we decode paho's bytes to the packet we
// meant, and paho decodes ours to the packet it meant.
func TestPahoEncodesAsWeDo(t *testing.T) {
	for _, pp := range pahoPairs() {
		pp.ours.Version = Version311
		name := pp.ours.Type.String()
		var pb bytes.Buffer
		if err := pp.paho.Write(&pb); err != nil {
			t.Fatalf("%s: paho Write: %v", name, err)
		}
		ours := mustAppend(t, pp.ours)
		if !bytes.Equal(pb.Bytes(), ours) {
			t.Errorf("%s: paho writes % x\n      we write % x", name, pb.Bytes(), ours)
		}

		how := fromClients
		var s []byte
		if pp.ours.Type.fromServer() && pp.ours.Type != PUBLISH && !isAck(pp.ours.Type) && pp.ours.Type != DISCONNECT {
			how = fromServer3
		} else if pp.ours.Type != CONNECT {
			s = connectFor(t, Version311)
		}
		s = append(s, pb.Bytes()...)
		got := parseChunks(t, DefaultLimits(), how, whole(s))
		if got.err != nil || len(got.pkts) == 0 {
			t.Fatalf("%s: we cannot decode paho's bytes: %s", name, got.msg)
		}
		if last, want := got.pkts[len(got.pkts)-1], pktText(pp.ours); last != want {
			t.Errorf("%s: paho's bytes decode to\n %s\nwant %s", name, last, want)
		}

		back, err := packets.ReadPacket(bytes.NewReader(ours))
		if err != nil {
			t.Fatalf("%s: paho cannot read our bytes: %v", name, err)
		}
		if !reflect.DeepEqual(normalizePaho(back), normalizePaho(pp.paho)) {
			t.Errorf("%s: paho reads our bytes as %v, want %v", name, back, pp.paho)
		}
	}
}

func isAck(t Type) bool { return t >= PUBACK && t <= PUBCOMP }

// normalizePaho renders a paho packet for comparison: its String and the
// fields String leaves out.
func normalizePaho(p packets.ControlPacket) string {
	s := p.String()
	switch v := p.(type) {
	case *packets.ConnectPacket:
		s += fmt.Sprintf(" %q %q %q", v.WillTopic, v.WillMessage, v.Password)
	case *packets.PublishPacket:
		s += fmt.Sprintf(" %q", v.Payload)
	case *packets.SubscribePacket:
		s += fmt.Sprintf(" %q %v", v.Topics, v.Qoss)
	case *packets.UnsubscribePacket:
		s += fmt.Sprintf(" %q", v.Topics)
	case *packets.SubackPacket:
		s += fmt.Sprintf(" %v", v.ReturnCodes)
	}
	return s
}
