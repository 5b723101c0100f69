package mqtt

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"edgeq/bridge"
	"edgeq/wal"
)

// failingAppender refuses every append with a storage error while failing
// is set, and passes the others to a real log.
type failingAppender struct {
	log     *wal.Log
	err     error
	failing atomic.Bool
	refused atomic.Int64
}

var _ bridge.Appender = (*failingAppender)(nil)

func (f *failingAppender) AppendAsync(rec *wal.Record, done func(wal.Position, error)) {
	if f.failing.Load() {
		f.refused.Add(1)
		done(wal.Position{}, f.err)
		return
	}
	f.log.AppendAsync(rec, done)
}

// A storage error is not acked: the bridge takes nothing more from that
// connection, closes it after backoff, and stores everything once the
// broker redelivers it and the storage is back.
func TestStorageErrorLeavesMessagesForRedelivery(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"retention budget", wal.ErrFull},
		{"disk full", fmt.Errorf("wal: write partition 3: %w", syscall.ENOSPC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mq := startMosquitto(t, brokerOptions{})
			log := openLog(t, t.TempDir())
			defer log.Close()
			app := &failingAppender{log: log, err: tt.err}
			app.failing.Store(true)
			b := startBridge(t, testConfig("full", mq.url()), app)
			waitFor(t, 10*time.Second, "connected", func() bool { return b.Status().Connected })

			msgs := makeMessages(10, 30)
			pahoPublish(t, mq.url(), msgs)
			waitFor(t, 10*time.Second, "a forced reconnect while failing", func() bool {
				return b.Status().Counters.ForcedReconnects >= 1 && b.Status().Counters.Reconnects >= 1
			})
			if st := b.Status(); st.Counters.Stored != 0 || st.Counters.Acked != 0 || st.LastError == "" {
				t.Fatalf("while failing: stored %d, acked %d, last error %q; want nothing stored or acked, an error",
					st.Counters.Stored, st.Counters.Acked, st.LastError)
			}
			app.failing.Store(false)

			var c logContent
			waitFor(t, 30*time.Second, "every message stored after recovery", func() bool {
				c = readLog(t, log)
				return len(c.missing(msgs, allIndexes(len(msgs)))) == 0
			})
			if err := b.Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			st := b.Status().Counters
			if st.StorageErrors == 0 || st.Deferred == 0 {
				t.Errorf("storage errors %d, deferred %d; want both > 0", st.StorageErrors, st.Deferred)
			}
			t.Logf("refused %d appends, %d forced reconnects, %d redelivered, %d duplicates, %d reorders in the log",
				app.refused.Load(), st.ForcedReconnects, st.Redelivered, c.duplicates(), c.reorders())
		})
	}
}
