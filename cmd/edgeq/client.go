package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// clientFlags are the connection flags of pub, sub and bench.
type clientFlags struct {
	server, token, user, password, prefix string
	tlsCA, tlsCert, tlsKey                string
	tlsFirst                              bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", envOr("EDGEQ_SERVER", "nats://127.0.0.1:4222"), "NATS URL of the node (also $EDGEQ_SERVER)")
	fs.StringVar(&c.token, "token", os.Getenv("EDGEQ_TOKEN"), "auth token (also $EDGEQ_TOKEN)")
	fs.StringVar(&c.user, "user", "", "user name")
	fs.StringVar(&c.password, "password", "", "password")
	fs.StringVar(&c.prefix, "prefix", "telemetry", "telemetry subject prefix")
	fs.StringVar(&c.tlsCA, "tlsca", os.Getenv("EDGEQ_TLSCA"), "CA file the node's TLS certificate is checked against (also $EDGEQ_TLSCA)")
	fs.StringVar(&c.tlsCert, "tlscert", "", "client certificate file (nats.tls.verify)")
	fs.StringVar(&c.tlsKey, "tlskey", "", "client key file")
	fs.BoolVar(&c.tlsFirst, "tlsfirst", false, "TLS handshake before the server's INFO (nats.tls.handshake_first)")
}

func (c *clientFlags) connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.Timeout(5 * time.Second)}
	if c.token != "" {
		opts = append(opts, nats.Token(c.token))
	}
	if c.user != "" {
		opts = append(opts, nats.UserInfo(c.user, c.password))
	}
	if c.tlsCA != "" {
		opts = append(opts, nats.RootCAs(c.tlsCA))
	}
	if c.tlsCert != "" || c.tlsKey != "" {
		opts = append(opts, nats.ClientCert(c.tlsCert, c.tlsKey))
	}
	if c.tlsFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return nats.Connect(c.server, opts...)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runPub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	count := fs.Int("count", 1, "publish the message this many times")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for each durable acknowledgement")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "usage: edgeq pub [flags] DEVICE [DATA]   (DATA from stdin when absent)")
		return 2
	}
	device := fs.Arg(0)
	var data []byte
	if fs.NArg() == 2 {
		data = []byte(fs.Arg(1))
	} else {
		var err error
		if data, err = io.ReadAll(bufio.NewReader(os.Stdin)); err != nil {
			fmt.Fprintf(stderr, "edgeq pub: read stdin: %v\n", err)
			return 1
		}
	}
	nc, err := cf.connect("edgeq pub")
	if err != nil {
		fmt.Fprintf(stderr, "edgeq pub: connect %s: %v\n", cf.server, err)
		return 1
	}
	defer nc.Close()
	for i := 0; i < *count; i++ {
		msg, err := nc.Request(cf.prefix+"."+device, data, *timeout)
		if err != nil {
			fmt.Fprintf(stderr, "edgeq pub: %v\n", err)
			return 1
		}
		if refused := pubAckError(msg.Data); refused != "" {
			fmt.Fprintf(stderr, "edgeq pub: refused: %s\n", refused)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", msg.Data)
	}
	return 0
}

func runSub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	queue := fs.String("queue", "", "join this queue group (deliveries are acked)")
	count := fs.Int("count", 0, "exit after this many messages (0: run until interrupted)")
	noAck := fs.Bool("no-ack", false, "print but do not ack (deliveries come again after ack_wait)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	subject := cf.prefix + ".>"
	if fs.NArg() == 1 {
		subject = fs.Arg(0)
	} else if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "usage: edgeq sub [flags] [SUBJECT]")
		return 2
	}
	nc, err := cf.connect("edgeq sub")
	if err != nil {
		fmt.Fprintf(stderr, "edgeq sub: connect %s: %v\n", cf.server, err)
		return 1
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 1024)
	var sub *nats.Subscription
	if *queue != "" {
		sub, err = nc.ChanQueueSubscribe(subject, *queue, msgs)
	} else {
		sub, err = nc.ChanSubscribe(subject, msgs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "edgeq sub: subscribe %s: %v\n", subject, err)
		return 1
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		fmt.Fprintf(stderr, "edgeq sub: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "listening on %s", subject)
	if *queue != "" {
		fmt.Fprintf(stderr, " in queue group %s", *queue)
	}
	fmt.Fprintln(stderr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	for n := 0; *count == 0 || n < *count; n++ {
		select {
		case m := <-msgs:
			printMsg(stdout, m)
			if (strings.HasPrefix(m.Reply, "$EQ.ACK.") || strings.HasPrefix(m.Reply, "$JS.ACK.")) && !*noAck {
				if err := m.Ack(); err != nil {
					fmt.Fprintf(stderr, "edgeq sub: ack: %v\n", err)
				}
			}
		case <-sig:
			return 0
		}
	}
	return 0
}

func printMsg(w io.Writer, m *nats.Msg) {
	fmt.Fprintf(w, "[%s] %s\n", time.Now().Format("15:04:05.000"), m.Subject)
	keys := make([]string, 0, len(m.Header))
	for k := range m.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, strings.Join(m.Header[k], ", "))
	}
	fmt.Fprintf(w, "  %s\n", m.Data)
}

// pubAckError returns the reason of a refused publish in either shape the
// node answers with: JetStream's {"error":{"code":..,"description":..}}
// (JetStream on, the default) or {"error":"..."}; "" for a pub-ack.
func pubAckError(data []byte) string {
	var ack struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &ack) != nil || len(ack.Error) == 0 || string(ack.Error) == "null" {
		return ""
	}
	var text string
	if json.Unmarshal(ack.Error, &text) == nil {
		return text
	}
	var js struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	}
	if json.Unmarshal(ack.Error, &js) == nil && js.Description != "" {
		return fmt.Sprintf("%s (%d)", js.Description, js.Code)
	}
	return string(ack.Error)
}
