package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AckPrefix starts every ack subject; RdyPrefix every credit subject.
const (
	AckPrefix = "$EQ.ACK."
	RdyPrefix = "$EQ.RDY."
	DLQPrefix = "$EQ.DLQ."
)

// AckKind is what a worker said about a delivery.
type AckKind uint8

const (
	AckDone       AckKind = iota + 1 // empty or +ACK (also +NXT)
	AckNak                           // -NAK [delay]
	AckInProgress                    // +WPI
	AckTerm                          // +TERM [reason]
)

func (k AckKind) String() string {
	return [...]string{"?", "ack", "nak", "in_progress", "term"}[min(int(k), 4)]
}

// ErrBadAck is returned for an ack subject or payload edgeq did not issue.
var ErrBadAck = errors.New("dispatch: bad acknowledgement")

// ackToken is a parsed ack subject.
type ackToken struct {
	gid        int
	member     string
	partition  int
	offset     uint64
	deliveries int
}

func parseAckSubject(subject string) (ackToken, error) {
	var t ackToken
	rest, ok := strings.CutPrefix(subject, AckPrefix)
	if !ok {
		return t, fmt.Errorf("%w: subject %q", ErrBadAck, subject)
	}
	f := strings.Split(rest, ".")
	if len(f) != 5 || f[1] == "" {
		return t, fmt.Errorf("%w: subject %q", ErrBadAck, subject)
	}
	var err1, err2, err3, err4 error
	t.gid, err1 = strconv.Atoi(f[0])
	t.member = f[1]
	t.partition, err2 = strconv.Atoi(f[2])
	t.offset, err3 = strconv.ParseUint(f[3], 10, 64)
	t.deliveries, err4 = strconv.Atoi(f[4])
	if err := errors.Join(err1, err2, err3, err4); err != nil || t.offset == 0 || t.deliveries < 1 {
		return t, fmt.Errorf("%w: subject %q", ErrBadAck, subject)
	}
	return t, nil
}

// ParseAckPayload reads the JetStream ack tokens: empty or +ACK ack, -NAK nak
// with an optional delay (`-NAK {"delay": 5000000000}` as nats.go's
// NakWithDelay sends, or a duration string `-NAK 5s`), +WPI in progress, +TERM
// term (an optional reason after it is ignored). +NXT acks.
func ParseAckPayload(p []byte) (AckKind, time.Duration, error) {
	p = bytes.TrimSpace(p)
	switch {
	case len(p) == 0, bytes.Equal(p, []byte("+ACK")), bytes.HasPrefix(p, []byte("+NXT")):
		return AckDone, 0, nil
	case bytes.Equal(p, []byte("+WPI")):
		return AckInProgress, 0, nil
	case bytes.HasPrefix(p, []byte("+TERM")):
		return AckTerm, 0, nil
	case bytes.HasPrefix(p, []byte("-NAK")):
		arg := bytes.TrimSpace(p[4:])
		if len(arg) == 0 {
			return AckNak, 0, nil
		}
		if arg[0] == '{' {
			var v struct {
				Delay int64 `json:"delay"`
			}
			if err := json.Unmarshal(arg, &v); err != nil || v.Delay < 0 {
				return 0, 0, fmt.Errorf("%w: nak delay %q", ErrBadAck, arg)
			}
			return AckNak, time.Duration(v.Delay), nil
		}
		d, err := time.ParseDuration(string(arg))
		if err != nil || d < 0 {
			return 0, 0, fmt.Errorf("%w: nak delay %q", ErrBadAck, arg)
		}
		return AckNak, d, nil
	}
	return 0, 0, fmt.Errorf("%w: payload %q", ErrBadAck, p)
}
