package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"edgeq/wal"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := Load("", nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.Listen != "127.0.0.1:4222" || cfg.HTTP.Listen != "127.0.0.1:8222" || cfg.DataDir != "./edgeq-data" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	path := writeFile(t, `
data_dir: /from/file
log_level: debug
nats:
  listen: 127.0.0.1:5000
  max_payload: 2MiB
wal:
  durability: always
  fsync_interval: 20ms
  commit_bytes: 1MiB
groups:
  - subject: telemetry.>
    queue: uploader
    deliver: all
`)
	env := []string{"EDGEQ_DATA_DIR=/from/env", "EDGEQ_NATS_LISTEN=127.0.0.1:6000", "EDGEQ_WAL_MAX_BYTES=512MiB",
		"EDGEQ_QUEUE_ACK_WAIT=45s", "EDGEQ_HOT_ENABLED=false", "PATH=/bin", "EDGEQ_CONFIG=ignored"}
	cfg, err := Load(path, env, Flags{NATSListen: "127.0.0.1:7000"})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir from env over file", cfg.DataDir, "/from/env"},
		{"nats.listen from flag over env", cfg.NATS.Listen, "127.0.0.1:7000"},
		{"log_level from file", cfg.LogLevel, "debug"},
		{"max_payload unit", cfg.NATS.MaxPayload, ByteSize(2 << 20)},
		{"durability", cfg.WAL.Durability, wal.DurabilityAlways},
		{"fsync_interval", cfg.WAL.FsyncInterval, 20 * time.Millisecond},
		{"commit_bytes", cfg.WAL.CommitBytes, ByteSize(1 << 20)},
		{"commit_bytes to wal.Options", cfg.WALOptions().CommitBytes, 1 << 20},
		{"max_bytes from env", cfg.WAL.MaxBytes, ByteSize(512 << 20)},
		{"ack_wait from env", cfg.Queue.AckWait, 45 * time.Second},
		{"hot off from env", cfg.Hot.Enabled, false},
		{"group", cfg.Groups[0].Queue, "uploader"},
		{"untouched default", cfg.NATS.MaxConnections, 1024},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestRejectsWithKeyNames(t *testing.T) {
	cases := []struct {
		name, file string
		env        []string
		wantInErr  string
	}{
		{"unknown top key", "bogus: 1\n", nil, "bogus: unknown key"},
		{"unknown nested key", "nats:\n  listn: 127.0.0.1:1\n", nil, "nats.listn: unknown key (line 2)"},
		{"unknown key in list", "groups:\n  - subject: a\n    queue: b\n    ordr: none\n", nil, "groups[0].ordr"},
		{"bad duration", "wal:\n  fsync_interval: soon\n", nil, "soon"},
		{"bad size", "nats:\n  max_payload: lots\n", nil, "bad size"},
		{"bad durability", "wal:\n  durability: sometimes\n", nil, "durability"},
		{"commit_bytes too small", "wal:\n  commit_bytes: 100\n", nil, "commit_bytes"},
		{"beyond loopback without auth", "nats:\n  listen: 0.0.0.0:4222\n", nil, "nats.listen"},
		{"http beyond loopback without token", "http:\n  listen: 0.0.0.0:8222\n", nil, "http.listen"},
		{"http short token beyond loopback", "http:\n  listen: 0.0.0.0:8222\n  token: 15-characters..\n  allow_plaintext: true\n", nil, "http.token: 15 characters beyond loopback, want at least 16"},
		{"events too often", "http:\n  events_interval: 10ms\n", nil, "http.events_interval"},
		{"no event streams", "", []string{"EDGEQ_HTTP_MAX_EVENT_STREAMS=0"}, "http.max_event_streams"},
		{"bad group ordering", "groups:\n  - {subject: a, queue: b, ordering: sorted}\n", nil, "groups[0].ordering"},
		{"unknown env", "", []string{"EDGEQ_NATS_LISTN=x"}, "EDGEQ_NATS_LISTN: unknown setting; did you mean EDGEQ_NATS_LISTEN?"},
		{"bad env value", "", []string{"EDGEQ_QUEUE_MAX_DELIVER=many"}, "EDGEQ_QUEUE_MAX_DELIVER (queue.max_deliver)"},
		{"bad log level", "log_level: loud\n", nil, "log_level"},
		{"bad node id", "node_id: a b\n", nil, "node_id"},
		{"device share above the window", "queue:\n  read_ahead_msgs: 64\n  device_share_msgs: 65\n", nil, "queue.device_share_msgs"},
		{"negative device share bytes", "", []string{"EDGEQ_QUEUE_DEVICE_SHARE_BYTES=-1"}, "queue.device_share_bytes"},
		{"read-ahead budget too small", "queue:\n  read_ahead_budget: 1KiB\n", nil, "queue.read_ahead_budget: 1024 bytes, want 0 (no bound) or 256KiB..1GiB"},
		{"negative read-ahead budget", "", []string{"EDGEQ_QUEUE_READ_AHEAD_BUDGET=-1"}, "queue.read_ahead_budget"},
		{"memory limit too small", "memory_limit: 1MiB\n", nil, "memory_limit: 1048576 bytes, want 0"},
		{"negative move-back backlog", "hot:\n  move_back_backlog: -1\n", nil, "hot.move_back_backlog"},
		{"nsq beyond loopback without token", "nsq:\n  listen: 0.0.0.0:4150\n", nil, "nsq.listen: \"0.0.0.0:4150\" is beyond loopback: set nsq.auth_token"},
		{"nsq beyond loopback in plaintext", "nsq:\n  listen: 0.0.0.0:4150\n  auth_token: s3cret-of-16-chars\n", nil, "nsq.allow_plaintext: true"},
		{"nsq short token beyond loopback", "nsq:\n  listen: 0.0.0.0:4150\n  auth_token: short\n  allow_plaintext: true\n", nil, "nsq.auth_token"},
		{"nsq rdy", "nsq:\n  listen: 127.0.0.1:4150\n  max_rdy_count: 0\n", nil, "nsq.max_rdy_count"},
		{"nsq heartbeat", "", []string{"EDGEQ_NSQ_LISTEN=127.0.0.1:4150", "EDGEQ_NSQ_HEARTBEAT_INTERVAL=5m"}, "nsq.heartbeat_interval"},
		{"nsq msg size over max_payload", "nsq:\n  listen: 127.0.0.1:4150\n  max_msg_size: 2MiB\n", nil, "nsq.max_msg_size"},
		{"stream name with a dot", "jetstream:\n  stream: A.B\n", nil, "jetstream.stream"},
		{"no msg-id table", "", []string{"EDGEQ_JETSTREAM_MAX_MSG_IDS=0"}, "jetstream.max_msg_ids"},
		{"more consumers than groups", "jetstream:\n  max_consumers: 1000\n", nil, "jetstream.max_consumers"},
		{"kv bucket with a dot", "jetstream:\n  kv_bucket: a.b\n", nil, "jetstream.kv_bucket"},
		{"no ordered consumers", "", []string{"EDGEQ_JETSTREAM_MAX_ORDERED=0"}, "jetstream.max_ordered"},
		{"more ordered per connection than per node", "jetstream:\n  max_ordered: 4\n  max_ordered_per_conn: 5\n", nil, "jetstream.max_ordered_per_conn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = writeFile(t, c.file)
			}
			_, err := Load(path, c.env, Flags{})
			if err == nil || !strings.Contains(err.Error(), c.wantInErr) {
				t.Fatalf("error %v, want it to contain %q", err, c.wantInErr)
			}
		})
	}
}

func TestAuthAllowsNonLoopback(t *testing.T) {
	for _, c := range []string{
		"nats:\n  listen: 0.0.0.0:4222\n  auth_token: s3cret-of-16-chars\n  allow_plaintext: true\nhttp:\n  listen: 0.0.0.0:8222\n  token: an-http-token-of-16+\n  allow_plaintext: true\n",
		"nats:\n  listen: 0.0.0.0:4222\n  auth_token: s3cret-of-16-chars\n  tls: {cert_file: c.pem, key_file: k.pem, ca_file: ca.pem, verify: true, handshake_first: true, handshake_first_fallback: 50ms}\n" +
			"http:\n  listen: 0.0.0.0:8222\n  token: an-http-token-of-16+\n  tls: {cert_file: c.pem, key_file: k.pem}\n",
		"nsq:\n  listen: 0.0.0.0:4150\n  auth_token: s3cret-of-16-chars\n  tls: {cert_file: c.pem, key_file: k.pem, ca_file: ca.pem, verify: true}\n",
	} {
		if _, err := Load(writeFile(t, c), nil, Flags{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTLSRequiredBeyondLoopback(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"nats:\n  listen: 0.0.0.0:4222\n  auth_token: s3cret-of-16-chars\n", "nats.allow_plaintext: true"},
		{"http:\n  listen: 0.0.0.0:8222\n  token: an-http-token-of-16+\n", "http.allow_plaintext: true"},
		{"nats:\n  listen: 0.0.0.0:4222\n  auth_token: short\n  allow_plaintext: true\n", "nats.auth_token: 5 characters beyond loopback, want at least 16"},
		{"nats:\n  tls: {cert_file: c.pem}\n", "nats.tls.key_file"},
		{"nats:\n  tls: {key_file: k.pem}\n", "nats.tls.cert_file"},
		{"nats:\n  tls: {cert_file: c.pem, key_file: k.pem, verify: true}\n", "nats.tls.ca_file"},
		{"nats:\n  tls: {verify: true}\n", "nats.tls: ca_file, verify and handshake_first need cert_file and key_file"},
		{"nats:\n  tls: {cert_file: c.pem, key_file: k.pem, handshake_first_fallback: 50ms}\n", "nats.tls.handshake_first_fallback"},
		{"http:\n  tls: {cert_file: c.pem, key_file: k.pem, handshake_first: true}\n", "http.tls.handshake_first"},
		{"nsq:\n  listen: 0.0.0.0:4150\n  auth_token: s3cret-of-16-chars\n", "nsq.listen: \"0.0.0.0:4150\" is beyond loopback without TLS: set nsq.tls.cert_file and nsq.tls.key_file, or nsq.allow_plaintext: true"},
		{"nsq:\n  listen: 127.0.0.1:4150\n  tls: {cert_file: c.pem, key_file: k.pem, handshake_first: true}\n", "nsq.tls.handshake_first"},
		{"nsq:\n  listen: 127.0.0.1:4150\n  tls: {cert_file: c.pem, key_file: k.pem, verify: true}\n", "nsq.tls.ca_file"},
		{"nats:\n  users: [{user: u, password: $2a$10$short}]\n", "nats.users[0].password: looks like a bcrypt hash"},
		{"nats:\n  max_groups_per_connection: 0\n", "nats.max_groups_per_connection"},
		{"nats:\n  users: [{user: u, password: p, permissions: {subscribe: {deny: ['a.>.b']}}}]\n", "nats.users[0].permissions.subscribe.deny[0]"},
	} {
		if _, err := Load(writeFile(t, c.yaml), nil, Flags{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestNSQOffByDefault(t *testing.T) {
	cfg, err := Load("", nil, Flags{})
	if err != nil || cfg.NSQ.Listen != "" {
		t.Fatalf("nsq.listen %q, err %v: want off by default", cfg.NSQ.Listen, err)
	}
	path := writeFile(t, "nsq:\n  listen: 0.0.0.0:4150\n  auth_token: s3cret-of-16-chars\n  allow_plaintext: true\n")
	if _, err := Load(path, nil, Flags{}); err != nil {
		t.Fatal(err)
	}
}

func TestPrintedConfigLoadsBack(t *testing.T) {
	cfg := Default()
	cfg.Groups = []Group{{Subject: "telemetry.>", Queue: "q", Deliver: "all"}}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(writeFile(t, string(out)), nil, Flags{})
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out)
	}
	again, _ := back.YAML()
	if string(again) != string(out) {
		t.Fatalf("round trip differs:\n%s\n---\n%s", out, again)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"4096": 4096, "64KiB": 64 << 10, "1MiB": 1 << 20, "1GiB": 1 << 30, "1.5KB": 1500, "2 MB": 2e6, "0": 0} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1TiB-ish", "NaN"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestEnvNamesCoverScalars(t *testing.T) {
	names := strings.Join(EnvNames(), " ")
	for _, want := range []string{"EDGEQ_DATA_DIR", "EDGEQ_NATS_AUTH_TOKEN", "EDGEQ_WAL_DURABILITY", "EDGEQ_HOT_MIN_RATE"} {
		if !strings.Contains(names, want) {
			t.Errorf("%s missing from %s", want, names)
		}
	}
}

func TestClusterConfig(t *testing.T) {
	ok := "cluster:\n  name: plant\n  secret: 0123456789abcdef\n  mdns: false\n  peers: [10.0.0.2:7422]\n"
	cfg, err := Load(writeFile(t, ok), nil, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.MDNSEnabled() || cfg.Cluster.Listen != "0.0.0.0:7422" {
		t.Fatalf("cluster %+v", cfg.Cluster)
	}
	if cfg, err := Load(writeFile(t, ok+"  advertise: 192.168.1.20:17422\n"), nil, Flags{}); err != nil || cfg.Cluster.Advertise != "192.168.1.20:17422" {
		t.Fatalf("advertise: %+v %v", cfg.Cluster, err)
	}
	for body, key := range map[string]string{
		"cluster:\n  name: plant\n  mdns: false\n":                                              "cluster.secret",
		"cluster:\n  name: plant\n  secret: short\n  mdns: false\n":                             "cluster.secret",
		"cluster:\n  name: plant\n  secret: 0123456789abcdef\n":                                 "cluster.interface",
		"cluster:\n  name: plant\n  secret: 0123456789abcdef\n  mdns: false\n  peers: [nope]\n": "cluster.peers[0]",
		ok + "  advertise: gw1.local:7422\n":                                                    "cluster.advertise",
		ok + "  advertise: 10.0.0.1\n":                                                          "cluster.advertise",
		ok + "  advertise: 10.0.0.1:0\n":                                                        "cluster.advertise",
	} {
		if _, err := Load(writeFile(t, body), nil, Flags{}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", body, err, key)
		}
	}
	// Without a name nothing is checked and nothing listens.
	if _, err := Load(writeFile(t, "cluster:\n  priority: 3\n"), nil, Flags{}); err != nil {
		t.Fatal(err)
	}
}
