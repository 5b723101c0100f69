package config

import (
	"strings"
	"testing"
)

// TestBadValueNamesKeyPath: a value of the wrong type, from the file or the
// environment, is reported by its key path and in words, not by yaml's line
// and Go type.
func TestBadValueNamesKeyPath(t *testing.T) {
	cases := []struct {
		name, file string
		env        []string
		want       string
	}{
		{"duration", "wal:\n  durability: interval\n  fsync_interval: banana\n", nil, `wal.fsync_interval: "banana" is not a duration (e.g. 500ms, 10s, 1h) (line 3)`},
		{"integer", "nats:\n  max_connections: lots\n", nil, `nats.max_connections: "lots" is not an integer (line 2)`},
		{"bool", "hot:\n  enabled: maybe\n", nil, `hot.enabled: "maybe" is not true or false (line 2)`},
		{"number", "hot:\n  factor: ten\n", nil, `hot.factor: "ten" is not a number (line 2)`},
		{"size", "nats:\n  max_payload: lots\n", nil, `nats.max_payload: bad size "lots"`},
		{"in a list", "groups:\n  - {subject: a, queue: b, ack_wait: soon}\n", nil, `groups[0].ack_wait: "soon" is not a duration`},
		{"in an uplink", "uplinks:\n  - {name: a, type: http, timeout: 5 apples, http: {url: 'http://127.0.0.1:1'}}\n", nil, `uplinks[0].timeout: "5 apples" is not a duration`},
		{"in a bridge", "mqtt:\n  - name: m\n    broker: tcp://127.0.0.1:1883\n    qos: high\n", nil, `mqtt[0].qos: "high" is not an integer (line 4)`},
		{"list for a value", "wal:\n  max_bytes: [1, 2]\n", nil, "wal.max_bytes: a list, want a size"},
		{"value for a section", "nats: 4222\n", nil, `nats: "4222" is not a mapping of keys`},
		{"env duration", "", []string{"EDGEQ_WAL_FSYNC_INTERVAL=banana"}, `EDGEQ_WAL_FSYNC_INTERVAL (wal.fsync_interval): "banana" is not a duration`},
		{"wal size in range", "wal:\n  commit_bytes: 12B\n", nil, "wal.commit_bytes: 12B, want 1 KiB..64 MiB"},
		{"two wal keys", "wal:\n  commit_bytes: 12B\n  partitions: 0\n", nil, "wal.partitions: 0, want 1..1024"},
		{"wal segment", "", []string{"EDGEQ_WAL_SEGMENT_SIZE=1KiB"}, "wal.segment_size: 1KiB, want 64 KiB..64 MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = writeFile(t, c.file)
			}
			_, err := Load(path, c.env, Flags{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "!!") || strings.Contains(err.Error(), "unmarshal") {
				t.Fatalf("error %v speaks yaml, not keys", err)
			}
		})
	}
}

// TestUnknownEnvironment: a variable of a script's own (EDGEQ_BIN,
// EDGEQ_SRC) does not stop the node, it is noted as ignored; a name a
// typo away from a setting is refused with the setting it resembles.
func TestUnknownEnvironment(t *testing.T) {
	cfg, notes, err := LoadWithNotes("", []string{"EDGEQ_BIN=/usr/bin/edgeq", "EDGEQ_SRC=/src", "EDGEQ_E2E_BENCH_RECORDS=5", "EDGEQ_DATA_DIR=/d"}, Flags{})
	if err != nil {
		t.Fatalf("unrelated variables stop the node: %v", err)
	}
	if cfg.DataDir != "/d" {
		t.Fatalf("data_dir %q", cfg.DataDir)
	}
	if got := strings.Join(notes, "\n"); !strings.Contains(got, "EDGEQ_BIN is not a setting: ignored") || !strings.Contains(got, "EDGEQ_SRC") || len(notes) != 3 {
		t.Fatalf("notes %q", notes)
	}
	for typo, near := range map[string]string{
		"EDGEQ_NATS_LISTN":        "EDGEQ_NATS_LISTEN",        // a letter left out
		"EDGEQ_WAL_DURABILTIY":    "EDGEQ_WAL_DURABILITY",     // two swapped
		"EDGEQ_HTTP_TOKNE":        "EDGEQ_HTTP_TOKEN",         // two swapped
		"EDGEQ_wal_durability":    "EDGEQ_WAL_DURABILITY",     // case
		"EDGEQ_QUEUE_ACK_WAITS":   "EDGEQ_QUEUE_ACK_WAIT",     // one added
		"EDGEQ_WAL_FSYNC_INTERVL": "EDGEQ_WAL_FSYNC_INTERVAL", // a letter left out
	} {
		_, _, err := LoadWithNotes("", []string{typo + "=x"}, Flags{})
		if err == nil || !strings.Contains(err.Error(), typo+": unknown setting; did you mean "+near+"?") {
			t.Errorf("%s: %v, want it refused with did you mean %s", typo, err, near)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"abc", "ab", 1}, {"abc", "xabc", 1}, {"kitten", "sitting", 3}, {"BIN", "NODE_ID", 6}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
