package mqttproto

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// requireTool returns the path of a real client the test runs; with
// CI=true a missing one fails the test instead of skipping it
// (scripts/install-test-deps.sh installs mosquitto-clients).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (apt-get install mosquitto-clients): %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return path
}

// miniBroker answers one MQTT client at a time, just enough for it to run
// to its end (CONNACK, PUBACK, PUBREC/PUBCOMP, SUBACK plus one message,
// UNSUBACK, PINGRESP), and decodes everything the client sends with the
// codec under test. Each closed connection yields its transcript: one line
// per packet, or "error: ..." where decoding stopped.
type miniBroker struct {
	ln          net.Listener
	transcripts chan []string
	raw         chan []byte // every byte each connection sent
	live        chan string // each packet as it is decoded (dropped when full)
	// deliverOn is the packet type after whose answer the broker sends
	// its one message (SUBSCRIBE, or UNSUBSCRIBE when the client sends
	// both: a message sent before the last answer makes the client exit
	// with an answer unread, and its close resets the connection).
	deliverOn atomic.Int32
	subQoS    atomic.Int32 // the highest QoS granted
}

func startMiniBroker(t *testing.T) *miniBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &miniBroker{ln: ln, transcripts: make(chan []string, 16), raw: make(chan []byte, 16), live: make(chan string, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return b
}

func (b *miniBroker) port() string {
	return fmt.Sprint(b.ln.Addr().(*net.TCPAddr).Port)
}

func (b *miniBroker) serve(c net.Conn) {
	defer c.Close()
	var lines []string
	var raw []byte
	defer func() { b.raw <- raw; b.transcripts <- lines }()
	_ = c.SetDeadline(time.Now().Add(time.Minute)) // bounds a hang only
	p, _ := NewParser(DefaultLimits(), ServerSide)
	buf := make([]byte, 4096)
	var out []byte
	send := func(pkt Packet) {
		pkt.Version = p.Version()
		var err error
		if out, err = Append(out[:0], &pkt); err != nil {
			lines = append(lines, "encode error: "+err.Error())
			return
		}
		_, _ = c.Write(out)
	}
	for {
		n, err := c.Read(buf)
		if n > 0 {
			raw = append(raw, buf[:n]...)
			if err := p.Feed(buf[:n]); err != nil {
				lines = append(lines, "feed error: "+err.Error())
				return
			}
			for {
				pkt, ok, err := p.Next()
				if err != nil {
					lines = append(lines, "error: "+err.Error())
					if code, ok := ConnackCode311(err); ok && p.Version() != Version5 {
						out = append(out[:0], byte(CONNACK)<<4, 2, 0, code)
						_, _ = c.Write(out)
					}
					return
				}
				if !ok {
					break
				}
				lines = append(lines, pktText(pkt))
				select {
				case b.live <- lines[len(lines)-1]:
				default:
				}
				b.answer(pkt, send)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				lines = append(lines, "read error: "+err.Error())
			}
			return
		}
	}
}

func (b *miniBroker) answer(pkt Packet, send func(Packet)) {
	switch pkt.Type {
	case CONNECT:
		send(Packet{Type: CONNACK})
	case PUBLISH:
		switch pkt.QoS {
		case 1:
			send(Packet{Type: PUBACK, PacketID: pkt.PacketID})
		case 2:
			send(Packet{Type: PUBREC, PacketID: pkt.PacketID})
		}
	case PUBREL:
		send(Packet{Type: PUBCOMP, PacketID: pkt.PacketID})
	case PUBREC:
		send(Packet{Type: PUBREL, PacketID: pkt.PacketID})
	case SUBSCRIBE:
		var codes []byte
		var qos byte
		for s := range pkt.Subscriptions() {
			codes = append(codes, s.QoS)
			qos = max(qos, s.QoS)
		}
		send(Packet{Type: SUBACK, PacketID: pkt.PacketID, ReasonCodes: codes})
		b.subQoS.Store(int32(qos))
	case UNSUBSCRIBE:
		var codes []byte
		for range pkt.UnsubFilters() {
			codes = append(codes, 0)
		}
		send(Packet{Type: UNSUBACK, PacketID: pkt.PacketID, ReasonCodes: codes})
	case PINGREQ:
		send(Packet{Type: PINGRESP})
	}
	if pkt.Type == Type(b.deliverOn.Load()) {
		qos := byte(b.subQoS.Load())
		msg := Packet{Type: PUBLISH, QoS: qos, Topic: []byte("telemetry/dev-1"), Payload: []byte("21.5")}
		if qos > 0 {
			msg.PacketID = 1
		}
		if pkt.Version == Version5 {
			msg.Props = pr("user", [2]string{"Edgeq-Seq", "1"}, PropContentType, "text/plain")
		}
		send(msg)
	}
}

var recordSeeds = flag.Bool("record-seeds", false, "write what the real clients sent as FuzzParser seeds in testdata/fuzz")

// writeSeed writes a client's bytes as a FuzzParser seed (read in one
// piece, parsed as a server).
func writeSeed(t *testing.T, name string, raw []byte) {
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(\"\\x00\")\nbyte('\\x00')\n", raw)
	if err := os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzParser", name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRealClientBytes runs mosquitto_pub and mosquitto_sub (3.1.1 and 5.0,
// QoS 0, 1 and 2, wills, user properties) against a listener that answers
// with this package's encoder and decodes what they send with its parser.
func TestRealClientBytes(t *testing.T) {
	pub := requireTool(t, "mosquitto_pub")
	sub := requireTool(t, "mosquitto_sub")
	b := startMiniBroker(t)
	common := []string{"-h", "127.0.0.1", "-p", b.port()}
	for _, tc := range []struct {
		name   string
		tool   string
		args   []string
		stdout string   // what the client prints, when it matters
		fails  bool     // the client is refused
		want   []string // the transcript
	}{
		{name: "3.1.1 QoS 0", tool: pub, args: []string{"-V", "mqttv311", "-i", "pub-q0", "-t", "telemetry/dev-1", "-m", `{"t":21.5}`},
			want: []string{
				`CONNECT v3.1.1 clean=true keepalive=60 client="pub-q0"`,
				`PUBLISH v3.1.1 qos=0 dup=false retain=false topic="telemetry/dev-1" payload="{\"t\":21.5}"`,
				`DISCONNECT v3.1.1`,
			}},
		{name: "3.1.1 QoS 1, retained, will, user and password", tool: pub, args: []string{"-V", "mqttv311", "-i", "pub-q1", "-k", "30",
			"-u", "dev", "-P", "pw", "--will-topic", "telemetry/dev-1/status", "--will-payload", "offline", "--will-qos", "1", "--will-retain",
			"-q", "1", "-r", "-t", "telemetry/dev-1", "-m", "21.5"},
			want: []string{
				`CONNECT v3.1.1 clean=true keepalive=30 client="pub-q1" will(qos=1 retain=true topic="telemetry/dev-1/status" payload="offline") user="dev" pass="pw"`,
				`PUBLISH v3.1.1 id=1 qos=1 dup=false retain=true topic="telemetry/dev-1" payload="21.5"`,
				`DISCONNECT v3.1.1`,
			}},
		{name: "3.1.1 QoS 2, three messages, persistent session", tool: pub, args: []string{"-V", "mqttv311", "-i", "pub-q2", "-c",
			"-q", "2", "-t", "telemetry/dev-2", "-m", "x", "--repeat", "3"},
			want: []string{
				`CONNECT v3.1.1 clean=false keepalive=60 client="pub-q2"`,
				`PUBLISH v3.1.1 id=1 qos=2 dup=false retain=false topic="telemetry/dev-2" payload="x"`,
				`PUBREL v3.1.1 id=1`,
				`PUBLISH v3.1.1 id=2 qos=2 dup=false retain=false topic="telemetry/dev-2" payload="x"`,
				`PUBREL v3.1.1 id=2`,
				`PUBLISH v3.1.1 id=3 qos=2 dup=false retain=false topic="telemetry/dev-2" payload="x"`,
				`PUBREL v3.1.1 id=3`,
				`DISCONNECT v3.1.1`,
			}},
		{name: "5.0 QoS 0 with properties", tool: pub, args: []string{"-V", "5", "-i", "pub5-q0",
			"-D", "connect", "session-expiry-interval", "3600", "-D", "connect", "receive-maximum", "20",
			"-D", "connect", "maximum-packet-size", "65536", "-D", "connect", "user-property", "site", "kitchen",
			"-D", "publish", "user-property", "unit", "C", "-D", "publish", "user-property", "unit", "K",
			"-D", "publish", "content-type", "application/json", "-D", "publish", "message-expiry-interval", "30",
			"-D", "publish", "payload-format-indicator", "1",
			"-t", "telemetry/dev-5", "-m", `{"t":21.5}`},
			want: []string{
				`CONNECT v5.0 clean=true keepalive=60 client="pub5-q0" session-expiry-interval=3600 receive-maximum=20 maximum-packet-size=65536 user["site"]="kitchen"`,
				`PUBLISH v5.0 qos=0 dup=false retain=false topic="telemetry/dev-5" payload="{\"t\":21.5}" payload-format-indicator=1 message-expiry-interval=30 content-type="application/json" user["unit"]="C" user["unit"]="K"`,
				`DISCONNECT v5.0`,
			}},
		{name: "5.0 QoS 1 with a will and its properties", tool: pub, args: []string{"-V", "5", "-i", "pub5-q1",
			"--will-topic", "telemetry/dev-5/status", "--will-payload", "offline", "--will-qos", "1",
			"-D", "will", "will-delay-interval", "5", "-D", "will", "user-property", "why", "power",
			"-D", "will", "content-type", "text/plain",
			"-D", "publish", "topic-alias", "1", "-D", "publish", "user-property", "Edgeq-Device", "dev-5",
			"-q", "1", "-t", "telemetry/dev-5", "-m", "21.5"},
			want: []string{
				`CONNECT v5.0 clean=true keepalive=60 client="pub5-q1" will(qos=1 retain=false topic="telemetry/dev-5/status" payload="offline" content-type="text/plain" will-delay-interval=5 user["why"]="power") receive-maximum=20`,
				`PUBLISH v5.0 id=1 qos=1 dup=false retain=false topic="telemetry/dev-5" payload="21.5" topic-alias=1 user["Edgeq-Device"]="dev-5"`,
				`DISCONNECT v5.0`,
			}},
		{name: "5.0 QoS 2", tool: pub, args: []string{"-V", "5", "-i", "pub5-q2", "-q", "2", "-t", "telemetry/dev-6", "-m", "y", "--repeat", "2"},
			want: []string{
				`CONNECT v5.0 clean=true keepalive=60 client="pub5-q2" receive-maximum=20`, // mosquitto_pub sends its -M (default 20)
				`PUBLISH v5.0 id=1 qos=2 dup=false retain=false topic="telemetry/dev-6" payload="y"`,
				`PUBREL v5.0 id=1`,
				`PUBLISH v5.0 id=2 qos=2 dup=false retain=false topic="telemetry/dev-6" payload="y"`,
				`PUBREL v5.0 id=2`,
				`DISCONNECT v5.0`,
			}},
		{name: "3.1.1 subscriber QoS 1, shared and plain, then unsubscribe", tool: sub, args: []string{"-V", "mqttv311", "-i", "sub-q1",
			"-q", "1", "-t", "telemetry/#", "-t", "$share/workers/telemetry/+", "-U", "old/#", "-C", "1", "-v"},
			stdout: "telemetry/dev-1 21.5\n",
			want: []string{
				`CONNECT v3.1.1 clean=true keepalive=60 client="sub-q1"`,
				`SUBSCRIBE v3.1.1 id=1 sub("telemetry/#" qos=1 nl=false rap=false rh=0) sub("$share/workers/telemetry/+" qos=1 nl=false rap=false rh=0)`,
				`UNSUBSCRIBE v3.1.1 id=2 filter="old/#"`,
				`PUBACK v3.1.1 id=1`,
				`DISCONNECT v3.1.1`,
			}},
		{name: "5.0 subscriber QoS 2 with a subscription identifier", tool: sub, args: []string{"-V", "5", "-i", "sub5-q2",
			"-D", "subscribe", "subscription-identifier", "7", "-D", "subscribe", "user-property", "worker", "w1",
			"-q", "2", "-t", "$share/workers/telemetry/#", "-C", "1", "-v"},
			stdout: "telemetry/dev-1 21.5\n",
			want: []string{
				`CONNECT v5.0 clean=true keepalive=60 client="sub5-q2" receive-maximum=1`, // mosquitto_sub -C 1 takes one at a time
				`SUBSCRIBE v5.0 id=1 sub("$share/workers/telemetry/#" qos=2 nl=false rap=false rh=0) subscription-identifier=[7] user["worker"]="w1"`,
				`PUBREC v5.0 id=1`,
				`PUBCOMP v5.0 id=1`,
				`DISCONNECT v5.0`,
			}},
		{name: "3.1 is refused with CONNACK 1", tool: pub, args: []string{"-V", "mqttv31", "-i", "old", "-t", "a", "-m", "x"},
			fails: true,
			want: []string{
				"error: mqttproto: CONNECT protocol level: MQTT 3.1 (MQIsdp); 3.1.1 and 5.0 are supported: unsupported protocol version",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Contains(tc.args, "-U") {
				b.deliverOn.Store(int32(UNSUBSCRIBE))
			} else {
				b.deliverOn.Store(int32(SUBSCRIBE))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, tc.tool, append(append([]string{}, common...), tc.args...)...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if (err != nil) != tc.fails {
				t.Fatalf("%s: %v (want failure: %v)\nstdout: %s\nstderr: %s", cmd, err, tc.fails, stdout.String(), stderr.String())
			}
			if tc.fails && !strings.Contains(stderr.String(), "unacceptable protocol version") {
				t.Errorf("stderr %q does not show our CONNACK refusal", stderr.String())
			}
			if tc.stdout != "" && stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			var got []string
			var raw []byte
			select {
			case raw = <-b.raw:
				got = <-b.transcripts
			case <-ctx.Done():
				t.Fatal("no transcript")
			}
			if *recordSeeds {
				writeSeed(t, "mosquitto-"+tc.name, raw)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
