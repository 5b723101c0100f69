package mqttproto

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestPahoClientBytes runs paho.mqtt.golang's client (3.1.1: a will, a
// persistent session, QoS 0, 1 and 2 publishes, a QoS 1 subscription that
// receives one message) against the mini broker and checks what it sent,
// as decoded by this package.
func TestPahoClientBytes(t *testing.T) {
	b := startMiniBroker(t)
	b.deliverOn.Store(int32(SUBSCRIBE))
	got := make(chan string, 1)
	opts := paho.NewClientOptions().AddBroker("tcp://127.0.0.1:"+b.port()).
		SetClientID("paho-gw").SetCleanSession(false).SetKeepAlive(300*time.Second).
		SetUsername("dev").SetPassword("pw").
		SetBinaryWill("telemetry/paho-gw/status", []byte("offline"), 1, true).
		SetAutoReconnect(false).SetConnectRetry(false).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			got <- m.Topic() + " " + string(m.Payload())
		})
	c := paho.NewClient(opts)
	wait := func(what string, tok paho.Token) {
		t.Helper()
		if !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
			t.Fatalf("%s: %v", what, tok.Error())
		}
	}
	wait("connect", c.Connect())
	for qos := byte(0); qos <= 2; qos++ {
		wait("publish", c.Publish("telemetry/paho-gw", qos, false, []byte{'0' + qos}))
	}
	wait("subscribe", c.Subscribe("$share/workers/telemetry/#", 1, nil))
	select {
	case m := <-got:
		if m != "telemetry/dev-1 21.5" {
			t.Fatalf("received %q", m)
		}
	case <-time.After(time.Minute):
		t.Fatal("no message")
	}
	// paho acks after the handler returns, on another goroutine than
	// Disconnect's: wait for the PUBACK so the order is the client's, not
	// the scheduler's.
	for seen := false; !seen; {
		select {
		case l := <-b.live:
			seen = l == "PUBACK v3.1.1 id=1"
		case <-time.After(time.Minute):
			t.Fatal("no PUBACK")
		}
	}
	c.Disconnect(1000)

	var lines []string
	select {
	case <-b.raw:
		lines = <-b.transcripts
	case <-time.After(time.Minute):
		t.Fatal("no transcript")
	}
	want := []string{
		`CONNECT v3.1.1 clean=false keepalive=300 client="paho-gw" will(qos=1 retain=true topic="telemetry/paho-gw/status" payload="offline") user="dev" pass="pw"`,
		`PUBLISH v3.1.1 qos=0 dup=false retain=false topic="telemetry/paho-gw" payload="0"`,
		`PUBLISH v3.1.1 id=1 qos=1 dup=false retain=false topic="telemetry/paho-gw" payload="1"`,
		`PUBLISH v3.1.1 id=2 qos=2 dup=false retain=false topic="telemetry/paho-gw" payload="2"`,
		`PUBREL v3.1.1 id=2`,
		`SUBSCRIBE v3.1.1 id=3 sub("$share/workers/telemetry/#" qos=1 nl=false rap=false rh=0)`,
		`PUBACK v3.1.1 id=1`,
		`DISCONNECT v3.1.1`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transcript:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
