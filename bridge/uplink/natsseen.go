package uplink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Exactly once after any outage (nats uplink).
//
// Nats-Msg-Id drops a record sent again only within the stream's
// duplicate_window. Beyond it, a record the stream stored but whose
// pub-ack never reached the uplink (a lost connection, a timeout, an edgeq
// crash before its offsets were committed) would be stored twice. So
// before it sends again a record that may have gone out before (delivered
// more than once by the group, or flagged MaybeDelivered after a crash or
// failover), the uplink reads the last message the stream holds on the
// record's subject (STREAM.MSG.GET / direct get, last_by_subj): when its
// Edgeq-Node and Edgeq-Device are the record's and its Edgeq-Seq is at or
// above the record's, the stream has the record, since a device's records
// reach the stream in order (device_window 1): the record is acked to the
// group unsent (counted as skipped). Above device_window 1 a refused
// record can be overtaken, so nothing is skipped there (unverified).
//
// One read per device and connection: what it learnt is kept for the
// connection and raised by each acknowledged record of the device; a
// record whose outcome is unknown (a timeout, a lost connection) drops it.
// A subject shared by devices whose last message is another device's, or
// an answer the uplink may not read (permissions), cannot tell: the record
// goes out and Nats-Msg-Id is its only dedup (counted as unverified). A
// purged stream has no last message: the records go out again.

// seenVerdict is what the stream's last message says about a record.
type seenVerdict uint8

const (
	seenUnknown seenVerdict = iota // the stream cannot tell: send (Msg-Id dedup only)
	seenKnown                      // hw is the device's highest sequence the stream holds
)

// lastMsg is the stream's last message on a subject; nil: none.
type lastMsg struct {
	node, device, seq string
}

// judgeLast reads the stream's last message on a device's subject for
// (node, device): the device's highest sequence upstream, or unknown.
func judgeLast(m *lastMsg, node, device string) (seenVerdict, uint64) {
	if m == nil {
		return seenKnown, 0
	}
	if m.node != node || m.device != device {
		return seenUnknown, 0
	}
	seq, err := strconv.ParseUint(m.seq, 10, 64)
	if err != nil {
		return seenUnknown, 0
	}
	return seenKnown, seq
}

// natsSeen keeps, per device, the highest sequence known upstream on the
// current connection. Bound: maxOrderDevices devices (then it starts over:
// each device is read again).
type natsSeen struct {
	mu   sync.Mutex
	conn uint64
	devs map[devID]uint64
	// streams found on the connection, to map a subject to its stream
	// without asking; bound maxSeenStreams.
	streams []jetstream.Stream

	checks, skipped, unverified atomic.Uint64
	// denied: the server refused the uplink's user a look-up ($JS.API
	// permissions) on this connection: records go out unchecked.
	denied atomic.Bool
}

const maxSeenStreams = 64

func newNATSSeen() *natsSeen { return &natsSeen{devs: map[devID]uint64{}} }

// at resets what was learnt when the connection changed; call with mu held.
func (s *natsSeen) at(conn uint64) {
	if conn != s.conn {
		s.conn = conn
		clear(s.devs)
		s.streams = nil
	}
}

// known returns the device's highest sequence upstream learnt on conn.
func (s *natsSeen) known(k devID, conn uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at(conn)
	hw, ok := s.devs[k]
	return hw, ok
}

// learn keeps hw for the device on conn.
func (s *natsSeen) learn(k devID, conn, hw uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at(conn)
	if len(s.devs) >= maxOrderDevices {
		clear(s.devs)
	}
	s.devs[k] = max(s.devs[k], hw)
}

// answered notes the outcome of a record sent on conn: acknowledged raises
// what is known of its device; an unknown outcome forgets it.
func (s *natsSeen) answered(it *Item, conn uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn != s.conn {
		return
	}
	k := devKey(it)
	hw, had := s.devs[k]
	switch {
	case !ok:
		delete(s.devs, k)
	case had:
		s.devs[k] = max(hw, it.Seq)
	}
}

// stream returns the stream that takes subj: one found before on this
// connection, else asked for by subject.
func (s *natsSeen) stream(ctx context.Context, js jetstream.JetStream, subj string, conn uint64) (jetstream.Stream, error) {
	s.mu.Lock()
	s.at(conn)
	for _, st := range s.streams {
		if info := st.CachedInfo(); info != nil && anySubjectMatch(info.Config.Subjects, subj) {
			s.mu.Unlock()
			return st, nil
		}
	}
	s.mu.Unlock()
	name, err := js.StreamNameBySubject(ctx, subj)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if conn == s.conn {
		if len(s.streams) >= maxSeenStreams {
			s.streams = s.streams[:0]
		}
		s.streams = append(s.streams, st)
	}
	s.mu.Unlock()
	return st, nil
}

// errCheck: the stream could not be asked what it holds (the upstream is
// unreachable or not ready): the record is retried.
var errCheck = errors.New("reading the stream's last message of the device")

// check decides whether it, which may have gone out before, must be sent:
// skip is true when the stream already holds it. err (wrapping errCheck)
// means the stream could not be asked: retry later.
func (t *natsTransport) check(it *Item, subj string, conn uint64) (skip bool, err error) {
	if t.order != nil {
		// Above device_window 1 the stream may hold a device's record
		// without the one before it (a reorder), and what this uplink saw
		// of it dies with a crash or stays on another node's uplink: its
		// last record proves nothing about the earlier ones.
		t.seen.unverified.Add(1)
		return false, nil
	}
	k := devKey(it)
	hw, ok := t.seen.known(k, conn)
	if !ok {
		v, h, err := t.readLast(subj, it, conn)
		if err != nil {
			return false, err
		}
		if v == seenUnknown {
			t.seen.unverified.Add(1)
			return false, nil
		}
		hw = h
		t.seen.learn(k, conn, hw)
	}
	if it.Seq > hw {
		return false, nil
	}
	t.seen.skipped.Add(1)
	return true, nil
}

// errNotConnected: no connection to ask the stream on.
var errNotConnected = errors.New("not connected")

// readLast asks the stream for its last message on subj.
func (t *natsTransport) readLast(subj string, it *Item, conn uint64) (seenVerdict, uint64, error) {
	if !t.nc.IsConnected() {
		return seenUnknown, 0, fmt.Errorf("%w: %w", errCheck, errNotConnected)
	}
	if t.seen.denied.Load() {
		return t.lastErr(nats.ErrPermissionViolation)
	}
	t.seen.checks.Add(1)
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.Timeout)
	defer cancel()
	st, err := t.seen.stream(ctx, t.js, subj, conn)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// No stream takes the subject: it holds nothing of the device
		// (the publish tells whether it can be stored).
		return seenKnown, 0, nil
	}
	if err != nil {
		return t.lastErr(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		v, hw := judgeLast(nil, it.Node, it.Device)
		return v, hw, nil
	}
	if err != nil {
		return t.lastErr(err)
	}
	v, hw := judgeLast(&lastMsg{node: m.Header.Get("Edgeq-Node"), device: m.Header.Get("Edgeq-Device"), seq: m.Header.Get("Edgeq-Seq")},
		it.Node, it.Device)
	return v, hw, nil
}

// lastErr sorts a failed read: a JetStream API error the uplink cannot get
// past, or a request the server refused the user (a permissions violation,
// which reaches the request only as a timeout), leaves it unverified;
// anything else (timeouts, no responders, a lost connection) is retried.
func (t *natsTransport) lastErr(err error) (seenVerdict, uint64, error) {
	var api *jetstream.APIError
	if (errors.As(err, &api) && api.Code != 503 && api.Code != 408) || errors.Is(err, nats.ErrPermissionViolation) || t.seen.denied.Load() {
		t.logUnverified.Do(func() {
			t.logger.Warn("cannot read the stream's last message of a device: records sent again rely on the stream's duplicate_window alone", "err", err)
		})
		return seenUnknown, 0, nil
	}
	return seenUnknown, 0, fmt.Errorf("%w: %w", errCheck, err)
}

// anySubjectMatch reports whether subj (literal) matches one of filters.
func anySubjectMatch(filters []string, subj string) bool {
	for _, f := range filters {
		if subjectMatch(f, subj) {
			return true
		}
	}
	return false
}

// subjectMatch reports whether the literal subject subj matches the NATS
// filter f (tokens, "*" one token, ">" the rest).
func subjectMatch(f, subj string) bool {
	for {
		ft, frest, fmore := strings.Cut(f, ".")
		st, srest, smore := strings.Cut(subj, ".")
		switch {
		case ft == ">":
			return true
		case ft != "*" && ft != st:
			return false
		case !fmore || !smore:
			return fmore == smore
		}
		f, subj = frest, srest
	}
}
