// Package config is edgeq's node configuration: embedded defaults, then a YAML
// file, then EDGEQ_* environment variables, then command-line flags. Unknown
// keys and invalid values are rejected with a message that names the key.
package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/subject"
	"edgeq/internal/secret"
	"edgeq/wal"
)

// Config is the whole node configuration. Every field has a yaml key; the
// environment variable of a scalar is EDGEQ_ plus its key path in upper case
// joined by '_' (nats.listen → EDGEQ_NATS_LISTEN).
type Config struct {
	// NodeID names this node in headers and in the cluster. Empty: generated
	// once and kept in the data directory.
	NodeID string `yaml:"node_id"`
	// DataDir holds the log, offsets and node identity (default ./edgeq-data).
	DataDir string `yaml:"data_dir"`
	// LogLevel is debug, info, warn or error (default info).
	LogLevel string `yaml:"log_level"`
	// ShutdownTimeout bounds the drain on SIGTERM (default 10s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MemoryLimit is the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit): the garbage collector works harder
	// as the process nears it, instead of letting the heap grow to twice
	// what is live. 0 (default): 24 MiB + 2 × queue.read_ahead_budget.
	// A GOMEMLIMIT environment variable (e.g. GOMEMLIMIT=off) wins.
	MemoryLimit ByteSize `yaml:"memory_limit"`

	NATS      NATS          `yaml:"nats"`
	JetStream JetStream     `yaml:"jetstream"`
	NSQ       NSQ           `yaml:"nsq"`
	HTTP      HTTP          `yaml:"http"`
	WAL       WAL           `yaml:"wal"`
	Queue     QueueDefaults `yaml:"queue"`
	Groups    []Group       `yaml:"groups"`
	Hot       Hot           `yaml:"hot"`
	// Metrics configures /metrics and the device health of /v1/status.
	Metrics Metrics `yaml:"metrics"`
	// Serial lists the serial ports to read telemetry from.
	Serial []serial.Config `yaml:"serial"`
	// MQTT lists the MQTT brokers to bridge telemetry from.
	MQTT []MQTTBridge `yaml:"mqtt"`
	// Modbus lists the Modbus RTU and TCP buses to poll.
	Modbus []ModbusBus `yaml:"modbus"`
	// Cluster joins other gateways (off unless cluster.name is set).
	Cluster Cluster `yaml:"cluster"`
	// Uplinks forward telemetry to upstream engines (store and forward).
	Uplinks []Uplink `yaml:"uplinks"`
}

// Uplink is one uplink; fields left out keep uplink.DefaultConfig's values.
type Uplink uplink.Config

// UnmarshalYAML decodes over the defaults.
func (u *Uplink) UnmarshalYAML(n *yaml.Node) error {
	c := uplink.DefaultConfig()
	if err := n.Decode(&c); err != nil {
		return err
	}
	*u = Uplink(c)
	return nil
}

// MQTTBridge is one MQTT bridge; fields left out of the file keep
// mqtt.DefaultConfig's values (qos: 0 stays 0).
type MQTTBridge mqtt.Config

// UnmarshalYAML decodes over the defaults.
func (m *MQTTBridge) UnmarshalYAML(n *yaml.Node) error {
	c := mqtt.DefaultConfig()
	if err := n.Decode(&c); err != nil {
		return err
	}
	*m = MQTTBridge(c)
	return nil
}

// ModbusBus is one Modbus bus; fields left out of the file keep
// modbus.DefaultConfig's values (retries: 0 stays 0).
type ModbusBus modbus.Config

// UnmarshalYAML decodes over the defaults.
func (m *ModbusBus) UnmarshalYAML(n *yaml.Node) error {
	c := modbus.DefaultConfig()
	if err := n.Decode(&c); err != nil {
		return err
	}
	*m = ModbusBus(c)
	return nil
}

// NATS is the NATS client-protocol listener.
type NATS struct {
	// Listen is host:port (default 127.0.0.1:4222). Beyond loopback it needs
	// auth_token or users.
	Listen    string        `yaml:"listen"`
	AuthToken secret.String `yaml:"auth_token"`
	Users     []User        `yaml:"users"`
	// TelemetryPrefix is the first subject token of stored telemetry
	// (default "telemetry": PUB telemetry.<device>).
	TelemetryPrefix string `yaml:"telemetry_prefix"`
	// MaxPayload is the largest message accepted (default 1MiB).
	MaxPayload ByteSize `yaml:"max_payload"`
	// MaxControlLine is the longest protocol line (default 4KiB).
	MaxControlLine ByteSize `yaml:"max_control_line"`
	// MaxConnections bounds client connections (default 1024).
	MaxConnections int `yaml:"max_connections"`
	// MaxSubscriptions bounds subscriptions per connection (default 1024).
	MaxSubscriptions int `yaml:"max_subscriptions"`
	// MaxGroupsPerConnection bounds the queue groups one connection's
	// subscribes may create (default 8); joining existing groups is free.
	MaxGroupsPerConnection int `yaml:"max_groups_per_connection"`
	// MaxPending is the output a slow connection may have queued before it is
	// closed as a slow consumer (default 8MiB).
	MaxPending ByteSize `yaml:"max_pending"`
	// WriteDeadline closes a connection whose socket accepts nothing for this
	// long (default 5s).
	WriteDeadline time.Duration `yaml:"write_deadline"`
	// PingInterval and MaxPingsOut detect dead clients (default 20s, 3).
	PingInterval time.Duration `yaml:"ping_interval"`
	MaxPingsOut  int           `yaml:"max_pings_out"`
	// AuthTimeout is how long a new connection has to send CONNECT (default 5s).
	AuthTimeout time.Duration `yaml:"auth_timeout"`
	// TLS, when cert_file is set, is required of every client.
	TLS TLS `yaml:"tls"`
	// AllowPlaintext lets listen be beyond loopback without TLS.
	AllowPlaintext bool `yaml:"allow_plaintext"`
}

// NSQ is the NSQ TCP protocol (V2) listener: go-nsq and the NSQ tools as
// workers and publishers. The topic is nats.telemetry_prefix (or
// <prefix>.<device>); a channel is the queue group (<prefix>.>, channel).
type NSQ struct {
	// Listen is host:port, e.g. 127.0.0.1:4150; empty (the default) leaves
	// NSQ off. Beyond loopback it needs auth_token (clients send it with AUTH).
	Listen    string        `yaml:"listen"`
	AuthToken secret.String `yaml:"auth_token"`
	// TLS, when cert_file is set, is required of every client: IDENTIFY
	// must ask for tls_v1 (go-nsq's Config.TlsV1) and the connection is
	// upgraded, as with nsqd's --tls-required; ca_file and verify ask for
	// client certificates (nsqd's --tls-client-auth-policy require-verify).
	TLS TLS `yaml:"tls"`
	// AllowPlaintext lets listen be beyond loopback without TLS: tokens and
	// telemetry then cross the LAN in clear.
	AllowPlaintext bool `yaml:"allow_plaintext"`
	// DeviceField is the JSON path (tidwall/gjson syntax) of the device ID in
	// a message published to the bare topic (default "device").
	DeviceField string `yaml:"device_field"`
	// MaxRdyCount is the largest RDY a client may ask for (default 2500).
	MaxRdyCount int `yaml:"max_rdy_count"`
	// MaxMsgSize bounds one message (default 1MiB, at most nats.max_payload);
	// MaxBodySize an MPUB or IDENTIFY body (default 5MiB).
	MaxMsgSize  ByteSize `yaml:"max_msg_size"`
	MaxBodySize ByteSize `yaml:"max_body_size"`
	// MaxConnections bounds client connections (default 1024).
	MaxConnections int `yaml:"max_connections"`
	// MaxPending is the output a connection may have queued before it is
	// closed as a slow consumer (default 8MiB).
	MaxPending ByteSize `yaml:"max_pending"`
	// MaxPendingPublishes bounds one connection's publishes awaiting
	// durability; beyond it the connection is not read (default 1024).
	MaxPendingPublishes int `yaml:"max_pending_publishes"`
	// HeartbeatInterval is the default heartbeat (default 30s; clients may
	// ask for 1s..60s in IDENTIFY).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// MaxReqTimeout caps a REQ's delay (default 1h).
	MaxReqTimeout time.Duration `yaml:"max_req_timeout"`
	// WriteDeadline closes a connection whose socket accepts nothing for this
	// long (default 5s).
	WriteDeadline time.Duration `yaml:"write_deadline"`
}

// TLS is a listener's TLS (1.2 or later). The files are read again on
// reload, so a renewed certificate needs no restart.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// CAFile verifies client certificates; Verify requires one.
	CAFile string `yaml:"ca_file"`
	Verify bool   `yaml:"verify"`
	// HandshakeFirst (NATS only): clients start TLS before INFO, as with
	// nats.go's TLSHandshakeFirst. With HandshakeFirstFallback, a client
	// that sends nothing for that long gets INFO first and upgrades after.
	HandshakeFirst         bool          `yaml:"handshake_first"`
	HandshakeFirstFallback time.Duration `yaml:"handshake_first_fallback"`
}

// Enabled reports whether the listener does TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// User is one user/password pair for NATS clients, with optional
// permissions in nats-server's shape (no permissions: everything).
// JetStream is the JetStream API on the NATS listener: the node's log as
// one stream, queue groups as consumers (docs/jetstream.md).
type JetStream struct {
	// Enabled answers $JS.API and announces jetstream in INFO (default true).
	Enabled bool `yaml:"enabled"`
	// Stream names the node's stream (default TELEMETRY).
	Stream string `yaml:"stream"`
	// DuplicateWindow is how long a Nats-Msg-Id is remembered (default 2m),
	// MaxMsgIDs how many at most (default 100000; older ones are forgotten).
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	MaxMsgIDs       int           `yaml:"max_msg_ids"`
	// MaxConsumers bounds the consumers (default 64; each is a queue group).
	MaxConsumers int `yaml:"max_consumers"`
	// QueueAckSubjects gives core queue subscriptions (SUB telemetry.> q)
	// JetStream-form ack subjects instead of $EQ.ACK ones, so that tools
	// that only ack JetStream messages (natscli `sub --ack`) and
	// msg.Metadata() work with them (default true: an ack is taken only
	// from the member's own connection whatever its form, so the form is a
	// matter of which clients understand it; docs/jetstream.md).
	QueueAckSubjects bool `yaml:"queue_ack_subjects"`
	// InfoVersion, when set, is the whole version announced in NATS INFO
	// instead of 2.10.0+edgeq.<edgeq's version> (natsserver.InfoVersion),
	// for clients that gate features on the server's version (nats.js 2.x
	// wants 2.9.4 or later for its consumers API). A plain
	// MAJOR.MINOR.PATCH.
	InfoVersion string `yaml:"info_version"`
	// KVBucket names the read-only KV view of the stream (default
	// "telemetry": bucket telemetry, stream KV_telemetry; keys are device
	// IDs, a key's value is the device's newest reading); empty: none.
	KVBucket string `yaml:"kv_bucket"`
	// MaxOrdered bounds the ordered consumers (ack_policy none: reads of
	// the log with no queue group) of the node (default 256),
	// MaxOrderedPerConn those of one connection (default 16).
	MaxOrdered        int `yaml:"max_ordered"`
	MaxOrderedPerConn int `yaml:"max_ordered_per_conn"`
}

// kvBucketName is a KV bucket name as nats.go accepts it.
var kvBucketName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// plainVersion is MAJOR.MINOR.PATCH.
var plainVersion = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// User is one user/password pair for NATS clients.
type User struct {
	User        string        `yaml:"user"`
	Password    secret.String `yaml:"password"`
	Permissions *Permissions  `yaml:"permissions"`
}

// Permissions are a user's publish and subscribe rules: a subject is
// allowed when allow is empty or matches it, and deny does not.
type Permissions struct {
	Publish   Rules `yaml:"publish"`
	Subscribe Rules `yaml:"subscribe"`
}

// Rules are subject patterns (with * and > wildcards).
type Rules struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// HTTP is the HTTP API listener.
type HTTP struct {
	// Listen is host:port (default 127.0.0.1:8222); empty disables HTTP.
	Listen string `yaml:"listen"`
	// Token, when set, is required as "Authorization: Bearer <token>" on every
	// endpoint but /healthz and /readyz.
	Token secret.String `yaml:"token"`
	// Console serves the web console at / (default true); the API is
	// served either way.
	Console bool `yaml:"console"`
	// EventsInterval is how often /v1/events sends a status snapshot
	// (default 1s). One snapshot serves every open stream.
	EventsInterval time.Duration `yaml:"events_interval"`
	// MaxEventStreams bounds the open /v1/events streams (default 8).
	MaxEventStreams int `yaml:"max_event_streams"`
	// TLS serves HTTPS when cert_file is set.
	TLS TLS `yaml:"tls"`
	// AllowPlaintext lets listen be beyond loopback without TLS.
	AllowPlaintext bool `yaml:"allow_plaintext"`
}

// WAL configures the telemetry log; see wal.Options for the meaning.
type WAL struct {
	Partitions    int            `yaml:"partitions"`
	HotPartitions int            `yaml:"hot_partitions"`
	SegmentSize   ByteSize       `yaml:"segment_size"`
	Durability    wal.Durability `yaml:"durability"`
	FsyncInterval time.Duration  `yaml:"fsync_interval"`
	// LazySync: the longest records nobody waits for (serial, Modbus,
	// fire-and-forget publishes) stay unsynced when no reader waits for
	// them either: their loss window on a power cut.
	LazySync time.Duration `yaml:"lazy_sync"`
	// CommitBytes: bytes written since the last fsync round that start the
	// next one before fsync_interval (and the load rule's threshold).
	CommitBytes ByteSize       `yaml:"commit_bytes"`
	MaxBytes    ByteSize       `yaml:"max_bytes"`
	MaxAge      time.Duration  `yaml:"max_age"`
	FullPolicy  wal.FullPolicy `yaml:"full_policy"`
	MaxDevices  int            `yaml:"max_devices"`
	// MinFreeBytes and MinFreePercent: the free-space watermark of the data
	// file system (the larger applies).
	MinFreeBytes   ByteSize `yaml:"min_free_bytes"`
	MinFreePercent float64  `yaml:"min_free_percent"`
	// RetentionInterval and CheckpointInterval: how often retention runs and
	// the device table is checkpointed (tests shorten them).
	RetentionInterval  time.Duration `yaml:"retention_interval"`
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
}

// The node-wide read-ahead budget (queue.read_ahead_budget): the default
// keeps a Pi's queue groups within a few MiB whatever their number; alone,
// a group may hold about 6,000 records of 150 B.
const (
	DefaultReadAheadBudget = 4 << 20
	MinReadAheadBudget     = 256 << 10
	MaxReadAheadBudget     = 1 << 30 // an int on arm v7 too
)

// MinMemoryLimit is the least memory_limit: below it the collector would
// run almost constantly on an idle node.
const MinMemoryLimit = 16 << 20

// GCMemoryLimit is the soft memory limit memory_limit asks for (its
// default derived from the read-ahead budget).
func (c *Config) GCMemoryLimit() int64 {
	if c.MemoryLimit != 0 {
		return int64(c.MemoryLimit)
	}
	return 24<<20 + 2*int64(c.Queue.ReadAheadBudget)
}

// DefaultGroupTTL is queue.group_ttl's default: how long an undeclared
// queue group without members (a one-shot `--queue` subscriber, nsq_tail, a
// worker fleet that went away) keeps its position before it is removed.
// Minutes, not a day: such a group pins retention and takes one of the
// max_groups slots. Declare a group (groups:) or use a durable JetStream
// consumer to keep a position across longer outages.
const DefaultGroupTTL = 5 * time.Minute

// QueueDefaults apply to every queue group that does not set its own.
type QueueDefaults struct {
	AckWait        time.Duration `yaml:"ack_wait"`
	MaxDeliver     int           `yaml:"max_deliver"`
	MaxInFlight    int           `yaml:"max_in_flight"`
	GroupTTL       time.Duration `yaml:"group_ttl"`
	ReadAheadMsgs  int           `yaml:"read_ahead_msgs"`
	ReadAheadBytes ByteSize      `yaml:"read_ahead_bytes"`
	// DeviceShareMsgs / DeviceShareBytes: what one device may hold of a
	// partition's read-ahead window (0: read_ahead/8, at least 4 messages;
	// read_ahead_bytes/8). Beyond it its records are set aside and read
	// again later, so a device with a backlog does not stall the others.
	DeviceShareMsgs  int      `yaml:"device_share_msgs"`
	DeviceShareBytes ByteSize `yaml:"device_share_bytes"`
	MaxGroups        int      `yaml:"max_groups"`
	// ReadAheadBudget bounds what all queue groups together hold of
	// read-ahead (each record counts its size plus about 512 B), shared
	// fairly among them; beyond it records stay in the log until acks make
	// room. 0: no node-wide bound (each group has its own windows).
	ReadAheadBudget ByteSize `yaml:"read_ahead_budget"`
}

// Group declares a queue group that exists without members.
type Group struct {
	Subject  string `yaml:"subject"`
	Queue    string `yaml:"queue"`
	Deliver  string `yaml:"deliver"`  // new | all (default all for declared groups)
	Ordering string `yaml:"ordering"` // per_device (default) | none
	Strategy string `yaml:"strategy"` // random (default) | sticky
	// Zero values take the queue defaults.
	AckWait     time.Duration `yaml:"ack_wait"`
	MaxDeliver  int           `yaml:"max_deliver"`
	MaxInFlight int           `yaml:"max_in_flight"`
}

// Cluster configures the gateway cluster. Today it discovers peers,
// authenticates them and elects a leader per queue group; delivery across
// nodes is not built yet (each node delivers its own log).
type Cluster struct {
	// Name of the cluster; empty disables clustering.
	Name string `yaml:"name"`
	// Secret shared by the cluster's nodes (at least 16 bytes), or SecretFile
	// holding it.
	Secret     secret.String `yaml:"secret"`
	SecretFile string        `yaml:"secret_file"`
	// Priority ranks this node in leader elections (higher wins).
	Priority int `yaml:"priority"`
	// Listen is the peer protocol address (default 0.0.0.0:7422).
	Listen string `yaml:"listen"`
	// Advertise is the host:port other nodes dial to reach this one,
	// published by mDNS instead of the interface's addresses and the listen
	// port (for a gateway whose peer port is forwarded, or one address of
	// several). The host must be an IP address. Default: none.
	Advertise string `yaml:"advertise"`
	// Interface is the LAN interface for mDNS (required when mdns is on).
	Interface string `yaml:"interface"`
	// Peers are static peer addresses (host:port), for networks without multicast.
	Peers []string `yaml:"peers"`
	// MDNS discovers peers by mDNS (default true when a name is set).
	MDNS *bool `yaml:"mdns"`
	// HeartbeatInterval and FailureTimeout detect dead peers (default 500ms, 3s).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	FailureTimeout    time.Duration `yaml:"failure_timeout"`
}

// MDNSEnabled reports whether mDNS discovery runs.
func (c Cluster) MDNSEnabled() bool { return c.Name != "" && (c.MDNS == nil || *c.MDNS) }

// Hot configures hot-device isolation.
type Hot struct {
	Enabled bool          `yaml:"enabled"`
	Window  time.Duration `yaml:"window"`
	Factor  float64       `yaml:"factor"`
	MinRate float64       `yaml:"min_rate"`
	// MoveBackBacklog: a cooled device moves home only once at most this
	// many of its records wait undelivered in the hot partition.
	MoveBackBacklog int `yaml:"move_back_backlog"`
}

// Metrics configures the exposition. The disk and filesystem metrics are
// those of data_dir.
type Metrics struct {
	// ProcRoot and SysRoot are where procfs and sysfs are mounted (default
	// /proc and /sys). In a container, point them at the host's (e.g.
	// /host/proc) to report the gateway rather than the container. A root
	// that cannot be read makes its collectors report
	// edgeq_collector_success 0; the scrape still succeeds.
	ProcRoot string `yaml:"proc_root"`
	SysRoot  string `yaml:"sys_root"`
	// TopDevices is how many of the busiest devices /metrics labels by
	// device ID (default 10, at most 100; 0 leaves them out). No other
	// metric has a per-device label.
	TopDevices int `yaml:"top_devices"`
}

// MaxTopDevices bounds metrics.top_devices: the only per-device series.
const MaxTopDevices = 100

// Default returns the embedded defaults: a node that runs with no file.
func Default() Config {
	w := wal.DefaultOptions()
	return Config{
		DataDir:         "./edgeq-data",
		LogLevel:        "info",
		ShutdownTimeout: 10 * time.Second,
		JetStream: JetStream{Enabled: true, Stream: "TELEMETRY", DuplicateWindow: 2 * time.Minute, MaxMsgIDs: 100000, MaxConsumers: 64, QueueAckSubjects: true,
			KVBucket: "telemetry", MaxOrdered: 256, MaxOrderedPerConn: 16},
		NATS: NATS{
			Listen:                 "127.0.0.1:4222",
			TelemetryPrefix:        "telemetry",
			MaxPayload:             1 << 20,
			MaxControlLine:         4096,
			MaxConnections:         1024,
			MaxSubscriptions:       1024,
			MaxGroupsPerConnection: 8,
			MaxPending:             8 << 20,
			WriteDeadline:          5 * time.Second,
			PingInterval:           20 * time.Second,
			MaxPingsOut:            3,
			AuthTimeout:            5 * time.Second,
		},
		NSQ: NSQ{
			DeviceField:         "device",
			MaxRdyCount:         2500,
			MaxMsgSize:          1 << 20,
			MaxBodySize:         5 << 20,
			MaxConnections:      1024,
			MaxPending:          8 << 20,
			MaxPendingPublishes: 1024,
			HeartbeatInterval:   30 * time.Second,
			MaxReqTimeout:       time.Hour,
			WriteDeadline:       5 * time.Second,
		},
		HTTP: HTTP{Listen: "127.0.0.1:8222", Console: true, EventsInterval: time.Second, MaxEventStreams: 8},
		WAL: WAL{
			Partitions:    w.Partitions,
			HotPartitions: w.HotPartitions,
			SegmentSize:   ByteSize(w.SegmentSize),
			Durability:    w.Durability,
			FsyncInterval: w.FsyncInterval,
			LazySync:      w.LazySync,
			CommitBytes:   ByteSize(w.CommitBytes),
			MaxBytes:      ByteSize(w.MaxBytes),
			FullPolicy:    w.FullPolicy,
			MaxDevices:    w.MaxDevices,

			MinFreeBytes:       ByteSize(w.MinFreeBytes),
			MinFreePercent:     w.MinFreePercent,
			RetentionInterval:  w.RetentionInterval,
			CheckpointInterval: w.CheckpointInterval,
		},
		Queue: QueueDefaults{
			AckWait:         30 * time.Second,
			MaxDeliver:      5,
			MaxInFlight:     256,
			GroupTTL:        DefaultGroupTTL,
			ReadAheadMsgs:   1024,
			ReadAheadBytes:  4 << 20,
			MaxGroups:       64,
			ReadAheadBudget: DefaultReadAheadBudget,
		},
		Hot:     Hot{Enabled: true, Window: 10 * time.Second, Factor: 10, MinRate: 50, MoveBackBacklog: 32},
		Metrics: Metrics{ProcRoot: "/proc", SysRoot: "/sys", TopDevices: 10},
		Cluster: Cluster{Listen: "0.0.0.0:7422", HeartbeatInterval: 500 * time.Millisecond, FailureTimeout: 3 * time.Second},
	}
}

// WALOptions converts the wal section to wal.Options.
func (c *Config) WALOptions() wal.Options {
	o := wal.DefaultOptions()
	o.Partitions = c.WAL.Partitions
	o.HotPartitions = c.WAL.HotPartitions
	o.SegmentSize = int(c.WAL.SegmentSize)
	o.Durability = c.WAL.Durability
	o.FsyncInterval = c.WAL.FsyncInterval
	o.LazySync = c.WAL.LazySync
	o.CommitBytes = int(c.WAL.CommitBytes)
	o.MaxBytes = int64(c.WAL.MaxBytes)
	o.MaxAge = c.WAL.MaxAge
	o.FullPolicy = c.WAL.FullPolicy
	o.MaxDevices = c.WAL.MaxDevices
	o.MinFreeBytes = int64(c.WAL.MinFreeBytes)
	o.MinFreePercent = c.WAL.MinFreePercent
	o.RetentionInterval = c.WAL.RetentionInterval
	o.CheckpointInterval = c.WAL.CheckpointInterval
	o.MaxRecordBytes = int(c.NATS.MaxPayload) + 64<<10 // payload plus device, headers, framing
	return o
}

// Validate checks every value and names each bad key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.NodeID != "" && wal.ValidateDeviceID(c.NodeID) != nil {
		bad("node_id", "%q: use 1-128 characters of [A-Za-z0-9_:@-]", c.NodeID)
	}
	if c.DataDir == "" {
		bad("data_dir", "empty")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "%q, want debug, info, warn or error", c.LogLevel)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "%v, want > 0", c.ShutdownTimeout)
	}
	c.validateNATS(bad)
	c.validateNSQ(bad)
	if j := c.JetStream; j.Enabled {
		if j.Stream == "" || len(j.Stream) > 64 || strings.ContainsAny(j.Stream, ".*>/\\ \t\"") {
			bad("jetstream.stream", "%q, want a name of 1..64 characters without . * > / \\ or spaces", j.Stream)
		}
		if j.DuplicateWindow < 0 {
			bad("jetstream.duplicate_window", "%v, want >= 0", j.DuplicateWindow)
		}
		if j.InfoVersion != "" && !plainVersion.MatchString(j.InfoVersion) {
			bad("jetstream.info_version", "%q, want MAJOR.MINOR.PATCH such as 2.10.0", j.InfoVersion)
		}
		if j.MaxMsgIDs < 1 || j.MaxMsgIDs > 10_000_000 {
			bad("jetstream.max_msg_ids", "%d, want 1..10000000", j.MaxMsgIDs)
		}
		if j.KVBucket != "" && !kvBucketName.MatchString(j.KVBucket) {
			bad("jetstream.kv_bucket", "%q, want 1..64 of [A-Za-z0-9_-] (or empty: no KV view)", j.KVBucket)
		}
		if j.MaxOrdered < 1 || j.MaxOrdered > 100_000 {
			bad("jetstream.max_ordered", "%d, want 1..100000", j.MaxOrdered)
		}
		if j.MaxOrderedPerConn < 1 || j.MaxOrderedPerConn > j.MaxOrdered {
			bad("jetstream.max_ordered_per_conn", "%d, want 1..jetstream.max_ordered (%d)", j.MaxOrderedPerConn, j.MaxOrdered)
		}
		if j.MaxConsumers < 1 || j.MaxConsumers > c.Queue.MaxGroups {
			bad("jetstream.max_consumers", "%d, want 1..queue.max_groups (%d)", j.MaxConsumers, c.Queue.MaxGroups)
		}
	}
	if c.HTTP.Listen != "" {
		if err := checkHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", "%v", err)
		} else if !isLoopback(c.HTTP.Listen) && c.HTTP.Token == "" {
			bad("http.listen", "%q is beyond loopback: set http.token", c.HTTP.Listen)
		} else if !isLoopback(c.HTTP.Listen) && !c.HTTP.TLS.Enabled() && !c.HTTP.AllowPlaintext {
			bad("http.listen", "%q is beyond loopback without TLS: set http.tls.cert_file and http.tls.key_file, or http.allow_plaintext: true", c.HTTP.Listen)
		}
		if !isLoopback(c.HTTP.Listen) && c.HTTP.Token.IsSet() && c.HTTP.Token.Len() < MinTokenLen {
			bad("http.token", "%d characters beyond loopback, want at least %d", c.HTTP.Token.Len(), MinTokenLen)
		}
		validateTLS("http.tls", c.HTTP.TLS, bad)
		if c.HTTP.TLS.HandshakeFirst || c.HTTP.TLS.HandshakeFirstFallback != 0 {
			bad("http.tls.handshake_first", "only for nats.tls")
		}
	}
	if c.HTTP.EventsInterval < 250*time.Millisecond || c.HTTP.EventsInterval > time.Minute {
		bad("http.events_interval", "%v, want 250ms..1m", c.HTTP.EventsInterval)
	}
	if c.HTTP.MaxEventStreams < 1 || c.HTTP.MaxEventStreams > 256 {
		bad("http.max_event_streams", "%d, want 1..256", c.HTTP.MaxEventStreams)
	}
	wo := c.WALOptions()
	if err := wo.Validate(); err != nil {
		// One error per option, each "<option>: <why>": name them by key.
		walErrs := []error{err}
		if j, ok := errors.Unwrap(err).(interface{ Unwrap() []error }); ok {
			walErrs = j.Unwrap()
		}
		for _, e := range walErrs {
			opt, why, _ := strings.Cut(strings.TrimPrefix(e.Error(), "wal: invalid options: "), ": ")
			bad(walKey(opt), "%s", why)
		}
	}
	q := c.Queue
	if q.AckWait < time.Millisecond {
		bad("queue.ack_wait", "%v, want >= 1ms", q.AckWait)
	}
	if q.MaxDeliver < 1 {
		bad("queue.max_deliver", "%d, want >= 1", q.MaxDeliver)
	}
	if q.MaxInFlight < 1 || q.MaxInFlight > 1<<16 {
		bad("queue.max_in_flight", "%d, want 1..65536", q.MaxInFlight)
	}
	if q.GroupTTL < 0 {
		bad("queue.group_ttl", "%v, want >= 0", q.GroupTTL)
	}
	if q.ReadAheadMsgs < 1 || q.ReadAheadBytes < 1024 {
		bad("queue.read_ahead_msgs", "%d msgs / %d bytes, want >= 1 and >= 1KiB", q.ReadAheadMsgs, q.ReadAheadBytes)
	}
	if q.DeviceShareMsgs < 0 || q.DeviceShareMsgs > q.ReadAheadMsgs {
		bad("queue.device_share_msgs", "%d, want 0 (default) .. read_ahead_msgs %d", q.DeviceShareMsgs, q.ReadAheadMsgs)
	}
	if q.DeviceShareBytes < 0 {
		bad("queue.device_share_bytes", "%d, want >= 0", q.DeviceShareBytes)
	}
	if q.MaxGroups < 1 {
		bad("queue.max_groups", "%d, want >= 1", q.MaxGroups)
	}
	if q.ReadAheadBudget != 0 && (q.ReadAheadBudget < MinReadAheadBudget || q.ReadAheadBudget > MaxReadAheadBudget) {
		bad("queue.read_ahead_budget", "%d bytes, want 0 (no bound) or 256KiB..1GiB", q.ReadAheadBudget)
	}
	if c.MemoryLimit != 0 && c.MemoryLimit < MinMemoryLimit {
		bad("memory_limit", "%d bytes, want 0 (24MiB + 2 × queue.read_ahead_budget) or >= 16MiB", c.MemoryLimit)
	}
	seen := map[string]bool{}
	for i, g := range c.Groups {
		key := fmt.Sprintf("groups[%d]", i)
		if g.Subject == "" || g.Queue == "" {
			bad(key, "subject and queue are required")
		}
		if seen[g.Subject+" "+g.Queue] {
			bad(key, "group (%s, %s) declared twice", g.Subject, g.Queue)
		}
		seen[g.Subject+" "+g.Queue] = true
		if !oneOf(g.Deliver, "", "new", "all") {
			bad(key+".deliver", "%q, want new or all", g.Deliver)
		}
		if !oneOf(g.Ordering, "", "per_device", "none") {
			bad(key+".ordering", "%q, want per_device or none", g.Ordering)
		}
		if !oneOf(g.Strategy, "", "random", "sticky") {
			bad(key+".strategy", "%q, want random or sticky", g.Strategy)
		}
		if g.AckWait < 0 || g.MaxDeliver < 0 || g.MaxInFlight < 0 {
			bad(key, "ack_wait, max_deliver and max_in_flight must not be negative")
		}
	}
	c.validateCluster(bad)
	names := map[string]bool{}
	for i, sc := range c.Serial {
		if err := sc.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names[sc.Name] {
			bad(fmt.Sprintf("serial[%d].name", i), "%q used twice", sc.Name)
		}
		names[sc.Name] = true
	}
	for i := range c.MQTT {
		mc := mqtt.Config(c.MQTT[i])
		if err := mc.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names["mqtt:"+mc.Name] {
			bad(fmt.Sprintf("mqtt[%d].name", i), "%q used twice", mc.Name)
		}
		names["mqtt:"+mc.Name] = true
	}
	for i := range c.Modbus {
		mc := modbus.Config(c.Modbus[i]).WithDefaults()
		if err := mc.Validate(); err != nil {
			errs = append(errs, err)
		}
		if names["modbus:"+mc.Name] {
			bad(fmt.Sprintf("modbus[%d].name", i), "%q used twice", mc.Name)
		}
		names["modbus:"+mc.Name] = true
	}
	for i := range c.Uplinks {
		uc := uplink.Config(c.Uplinks[i])
		if err := uc.Validate(fmt.Sprintf("uplinks[%d]", i)); err != nil {
			errs = append(errs, err)
		}
		if names["uplink:"+uc.Name] {
			bad(fmt.Sprintf("uplinks[%d].name", i), "%q used twice", uc.Name)
		}
		names["uplink:"+uc.Name] = true
		if uc.Subject != "" && uc.Subject != c.NATS.TelemetryPrefix && !strings.HasPrefix(uc.Subject, c.NATS.TelemetryPrefix+".") {
			bad(fmt.Sprintf("uplinks[%d].subject", i), "%q, want a filter under %s.", uc.Subject, c.NATS.TelemetryPrefix)
		}
	}
	if len(c.Modbus) > modbus.MaxBuses {
		bad("modbus", "%d buses, at most %d", len(c.Modbus), modbus.MaxBuses)
	}
	if c.Hot.Enabled {
		if c.Hot.Window < time.Second {
			bad("hot.window", "%v, want >= 1s", c.Hot.Window)
		}
		if c.Hot.Factor <= 1 {
			bad("hot.factor", "%v, want > 1", c.Hot.Factor)
		}
		if c.Hot.MinRate <= 0 {
			bad("hot.min_rate", "%v, want > 0", c.Hot.MinRate)
		}
		if c.Hot.MoveBackBacklog < 0 {
			bad("hot.move_back_backlog", "%d, want >= 0", c.Hot.MoveBackBacklog)
		}
		if c.WAL.HotPartitions == 0 {
			bad("hot.enabled", "needs wal.hot_partitions > 0")
		}
	}
	if c.Metrics.ProcRoot == "" {
		bad("metrics.proc_root", "empty")
	}
	if c.Metrics.SysRoot == "" {
		bad("metrics.sys_root", "empty")
	}
	if c.Metrics.TopDevices < 0 || c.Metrics.TopDevices > MaxTopDevices {
		bad("metrics.top_devices", "%d, want 0..%d", c.Metrics.TopDevices, MaxTopDevices)
	}
	placeholders(reflect.ValueOf(c).Elem(), "", bad)
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
}

// placeholders refuses secret.Redacted as a secret's value: it is what
// --print-config prints, and a printed config fed back must not run with
// "<hidden>" as a password.
func placeholders(v reflect.Value, path string, bad func(key, format string, args ...any)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			placeholders(v.Elem(), path, bad)
		}
	case reflect.Struct:
		for name, f := range yamlFields(v.Type()) {
			placeholders(v.FieldByIndex(f.Index), joinKey(path, name), bad)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			placeholders(v.Index(i), fmt.Sprintf("%s[%d]", path, i), bad)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			placeholders(iter.Value(), joinKey(path, fmt.Sprint(iter.Key().Interface())), bad)
		}
	case reflect.String:
		if s, ok := v.Interface().(secret.String); ok && s.Reveal() == secret.Redacted {
			bad(path, "%q is what --print-config prints for a secret: put the secret itself", secret.Redacted)
		}
	}
}

func (c *Config) validateNATS(bad func(key, format string, args ...any)) {
	n := c.NATS
	if err := checkHostPort(n.Listen); err != nil {
		bad("nats.listen", "%v", err)
	} else if !isLoopback(n.Listen) && n.AuthToken == "" && len(n.Users) == 0 {
		bad("nats.listen", "%q is beyond loopback: set nats.auth_token or nats.users", n.Listen)
	} else if !isLoopback(n.Listen) && !n.TLS.Enabled() && !n.AllowPlaintext {
		bad("nats.listen", "%q is beyond loopback without TLS: set nats.tls.cert_file and nats.tls.key_file, or nats.allow_plaintext: true", n.Listen)
	}
	if !isLoopback(n.Listen) && n.AuthToken != "" && len(n.AuthToken) < MinTokenLen {
		bad("nats.auth_token", "%d characters beyond loopback, want at least %d", len(n.AuthToken), MinTokenLen)
	}
	validateTLS("nats.tls", n.TLS, bad)
	if n.TLS.HandshakeFirstFallback < 0 || n.TLS.HandshakeFirstFallback > 0 && !n.TLS.HandshakeFirst {
		bad("nats.tls.handshake_first_fallback", "%v, want > 0 and handshake_first: true", n.TLS.HandshakeFirstFallback)
	}
	for i, u := range n.Users {
		if u.User == "" || u.Password == "" {
			bad(fmt.Sprintf("nats.users[%d]", i), "user and password are required")
		}
		if p := u.Permissions; p != nil {
			for _, r := range []struct {
				key      string
				patterns []string
			}{{"publish.allow", p.Publish.Allow}, {"publish.deny", p.Publish.Deny}, {"subscribe.allow", p.Subscribe.Allow}, {"subscribe.deny", p.Subscribe.Deny}} {
				for j, s := range r.patterns {
					if err := subject.CheckFilter(s); err != nil {
						bad(fmt.Sprintf("nats.users[%d].permissions.%s[%d]", i, r.key, j), "%q: %v", s, err)
					}
				}
			}
		}
		if strings.HasPrefix(u.Password.Reveal(), "$2") {
			// A bcrypt hash, as nats-server accepts (edgeq checks it at CONNECT).
			if _, err := bcrypt.Cost([]byte(u.Password)); err != nil {
				bad(fmt.Sprintf("nats.users[%d].password", i), "looks like a bcrypt hash but is not one: %v", err)
			}
		}
	}
	if n.AuthToken != "" && len(n.Users) > 0 {
		bad("nats.auth_token", "set either auth_token or users, not both")
	}
	if n.TelemetryPrefix == "" || strings.ContainsAny(n.TelemetryPrefix, ".*> \t") {
		bad("nats.telemetry_prefix", "%q, want one subject token", n.TelemetryPrefix)
	}
	if n.MaxPayload < 1024 || n.MaxPayload > 64<<20 {
		bad("nats.max_payload", "%d, want 1KiB..64MiB", n.MaxPayload)
	}
	if n.MaxControlLine < 256 || n.MaxControlLine > 1<<20 {
		bad("nats.max_control_line", "%d, want 256B..1MiB", n.MaxControlLine)
	}
	if n.MaxConnections < 1 {
		bad("nats.max_connections", "%d, want >= 1", n.MaxConnections)
	}
	if n.MaxSubscriptions < 1 {
		bad("nats.max_subscriptions", "%d, want >= 1", n.MaxSubscriptions)
	}
	if n.MaxGroupsPerConnection < 1 {
		bad("nats.max_groups_per_connection", "%d, want >= 1", n.MaxGroupsPerConnection)
	}
	if n.MaxPending < n.MaxPayload {
		bad("nats.max_pending", "%d, want >= max_payload (%d)", n.MaxPending, n.MaxPayload)
	}
	if n.WriteDeadline <= 0 {
		bad("nats.write_deadline", "%v, want > 0", n.WriteDeadline)
	}
	if n.PingInterval <= 0 || n.MaxPingsOut < 1 {
		bad("nats.ping_interval", "%v with max_pings_out %d, want > 0 and >= 1", n.PingInterval, n.MaxPingsOut)
	}
	if n.AuthTimeout <= 0 {
		bad("nats.auth_timeout", "%v, want > 0", n.AuthTimeout)
	}
}

func (c *Config) validateNSQ(bad func(key, format string, args ...any)) {
	n := c.NSQ
	if n.Listen == "" {
		return
	}
	if err := checkHostPort(n.Listen); err != nil {
		bad("nsq.listen", "%v", err)
	} else if !isLoopback(n.Listen) && n.AuthToken == "" {
		bad("nsq.listen", "%q is beyond loopback: set nsq.auth_token", n.Listen)
	} else if !isLoopback(n.Listen) && !n.TLS.Enabled() && !n.AllowPlaintext {
		bad("nsq.listen", "%q is beyond loopback without TLS: set nsq.tls.cert_file and nsq.tls.key_file, or nsq.allow_plaintext: true", n.Listen)
	} else if !isLoopback(n.Listen) && n.AuthToken.Len() < MinTokenLen {
		bad("nsq.auth_token", "%d characters: beyond loopback at least %d", n.AuthToken.Len(), MinTokenLen)
	}
	validateTLS("nsq.tls", n.TLS, bad)
	if n.TLS.HandshakeFirst || n.TLS.HandshakeFirstFallback != 0 {
		bad("nsq.tls.handshake_first", "only for nats.tls (NSQ clients upgrade after IDENTIFY)")
	}
	if n.DeviceField == "" {
		bad("nsq.device_field", "empty, want a JSON path such as device")
	}
	if n.MaxRdyCount < 1 || n.MaxRdyCount > 1<<16 {
		bad("nsq.max_rdy_count", "%d, want 1..65536", n.MaxRdyCount)
	}
	if n.MaxMsgSize < 1024 || n.MaxMsgSize > c.NATS.MaxPayload {
		bad("nsq.max_msg_size", "%d, want 1KiB..nats.max_payload (%d)", n.MaxMsgSize, c.NATS.MaxPayload)
	}
	if n.MaxBodySize < n.MaxMsgSize || n.MaxBodySize > 256<<20 {
		bad("nsq.max_body_size", "%d, want max_msg_size (%d)..256MiB", n.MaxBodySize, n.MaxMsgSize)
	}
	if n.MaxConnections < 1 {
		bad("nsq.max_connections", "%d, want >= 1", n.MaxConnections)
	}
	if n.MaxPending < n.MaxMsgSize+64 {
		bad("nsq.max_pending", "%d, want > max_msg_size (%d)", n.MaxPending, n.MaxMsgSize)
	}
	if n.MaxPendingPublishes < 1 {
		bad("nsq.max_pending_publishes", "%d, want >= 1", n.MaxPendingPublishes)
	}
	if n.HeartbeatInterval < time.Second || n.HeartbeatInterval > time.Minute {
		bad("nsq.heartbeat_interval", "%v, want 1s..60s", n.HeartbeatInterval)
	}
	if n.MaxReqTimeout < 0 {
		bad("nsq.max_req_timeout", "%v, want >= 0", n.MaxReqTimeout)
	}
	if n.WriteDeadline <= 0 {
		bad("nsq.write_deadline", "%v, want > 0", n.WriteDeadline)
	}
}

func (c *Config) validateCluster(bad func(key, format string, args ...any)) {
	cl := c.Cluster
	if cl.Name == "" {
		return
	}
	if cl.Secret == "" && cl.SecretFile == "" {
		bad("cluster.secret", "a cluster needs a shared secret (cluster.secret or cluster.secret_file)")
	} else if cl.Secret != "" && len(cl.Secret) < 16 {
		bad("cluster.secret", "at least 16 bytes")
	}
	if err := checkHostPort(cl.Listen); err != nil {
		bad("cluster.listen", "%v", err)
	}
	if cl.Advertise != "" {
		host, port, err := net.SplitHostPort(cl.Advertise)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || net.ParseIP(host) == nil || n < 1 || n > 65535 {
			bad("cluster.advertise", "%q, want an IP address and a port, e.g. 192.168.1.20:7422", cl.Advertise)
		}
	}
	if cl.MDNSEnabled() && cl.Interface == "" {
		bad("cluster.interface", "required for mDNS discovery (or set cluster.mdns: false and list cluster.peers)")
	}
	for i, p := range cl.Peers {
		if err := checkHostPort(p); err != nil {
			bad(fmt.Sprintf("cluster.peers[%d]", i), "%v", err)
		}
	}
	if cl.FailureTimeout <= cl.HeartbeatInterval {
		bad("cluster.failure_timeout", "%v, want more than heartbeat_interval %v", cl.FailureTimeout, cl.HeartbeatInterval)
	}
}

// walKey is the config key of a wal.Options field named as in its errors.
func walKey(opt string) string {
	switch opt {
	case "max_record_bytes":
		return "nats.max_payload" // the largest record follows the largest payload
	}
	return "wal." + opt
}

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %v", addr, err)
	}
	if port == "" {
		return fmt.Errorf("%q: no port", addr)
	}
	return nil
}

// MinTokenLen is the shortest nats.auth_token, nsq.auth_token and
// http.token accepted beyond loopback.
const MinTokenLen = 16

// validateTLS checks a listener's TLS keys (the files are read at start).
func validateTLS(key string, t TLS, bad func(key, format string, args ...any)) {
	switch {
	case !t.Enabled():
		if t.CAFile != "" || t.Verify || t.HandshakeFirst {
			bad(key, "ca_file, verify and handshake_first need cert_file and key_file")
		}
	case t.CertFile == "":
		bad(key+".cert_file", "required with key_file")
	case t.KeyFile == "":
		bad(key+".key_file", "required with cert_file")
	case t.Verify && t.CAFile == "":
		bad(key+".ca_file", "required with verify: true")
	}
}

// isLoopback reports whether addr listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
