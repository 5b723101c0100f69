package nsqserver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// The NSQ TCP protocol V2 (https://nsq.io/clients/tcp_protocol_spec.html):
// after the 4-byte magic "  V2" a client sends newline-terminated commands,
// some followed by a 4-byte big-endian size and a body; the server answers
// with frames: size, frame type, data.

// Magic starts every V2 connection.
const Magic = "  V2"

// Frame types.
const (
	FrameResponse int32 = 0
	FrameError    int32 = 1
	FrameMessage  int32 = 2
)

// MsgIDLength is the size of a message ID on the wire.
const MsgIDLength = 16

// CmdKind names a client command.
type CmdKind uint8

// Commands.
const (
	CmdIdentify CmdKind = iota + 1
	CmdAuth
	CmdSub
	CmdRdy
	CmdFin
	CmdReq
	CmdTouch
	CmdNop
	CmdCls
	CmdPub
	CmdMpub
	CmdDpub
)

var cmdNames = [...]string{"", "IDENTIFY", "AUTH", "SUB", "RDY", "FIN", "REQ", "TOUCH", "NOP", "CLS", "PUB", "MPUB", "DPUB"}

func (k CmdKind) String() string {
	if int(k) < len(cmdNames) && k > 0 {
		return cmdNames[k]
	}
	return "?"
}

// Command is one parsed client command. Its slices alias the parser's
// input: valid until the caller feeds it again.
type Command struct {
	Kind    CmdKind
	Topic   []byte        // SUB, PUB, MPUB, DPUB
	Channel []byte        // SUB
	ID      []byte        // FIN, REQ, TOUCH: MsgIDLength bytes
	Count   int64         // RDY (1 when not given, as nsqd)
	Delay   time.Duration // REQ timeout, DPUB defer (milliseconds on the wire)
	Body    []byte        // IDENTIFY, AUTH, PUB, DPUB
	Bodies  [][]byte      // MPUB
}

// Limits bound what a command may carry.
type Limits struct {
	MaxLine     int // longest command line
	MaxMsgSize  int // largest message (PUB, DPUB, each of MPUB)
	MaxBodySize int // largest body (IDENTIFY, AUTH, MPUB)
	MaxMessages int // most messages in one MPUB (0: as many as fit MaxBodySize)
}

// Error is a protocol error as nsqd reports it: the frame's text is
// "<code> <description>"; a fatal one closes the connection after it is sent.
type Error struct {
	Code  string
	Desc  string
	Fatal bool
}

func (e *Error) Error() string { return e.Code + " " + e.Desc }

func fatalf(code, format string, args ...any) *Error {
	return &Error{Code: code, Desc: fmt.Sprintf(format, args...), Fatal: true}
}

func softf(code, format string, args ...any) *Error {
	return &Error{Code: code, Desc: fmt.Sprintf(format, args...)}
}

// ParseCommand parses one command at the start of buf into cmd. It returns
// the bytes consumed, 0 with a nil error when buf does not hold a whole
// command yet, or a protocol error (*Error; fatal ones end the connection,
// as nsqd's do). cmd.Bodies reuses its backing array.
func ParseCommand(buf []byte, lim Limits, cmd *Command) (int, error) {
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		if len(buf) > lim.MaxLine {
			return 0, fatalf("E_INVALID", "command line longer than %d bytes", lim.MaxLine)
		}
		return 0, nil
	}
	if nl > lim.MaxLine {
		return 0, fatalf("E_INVALID", "command line longer than %d bytes", lim.MaxLine)
	}
	line := buf[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	n := nl + 1
	bodies := cmd.Bodies[:0]
	*cmd = Command{Bodies: bodies}
	name, rest, _ := bytes.Cut(line, []byte(" "))
	var pbuf [4][]byte
	params := fields(rest, &pbuf)
	switch string(name) {
	case "IDENTIFY":
		cmd.Kind = CmdIdentify
		return withBody(buf, n, lim.MaxBodySize, "E_BAD_BODY", "IDENTIFY", cmd)
	case "AUTH":
		cmd.Kind = CmdAuth
		if len(params) != 0 {
			return 0, fatalf("E_INVALID", "AUTH invalid number of parameters")
		}
		return withBody(buf, n, lim.MaxBodySize, "E_BAD_BODY", "AUTH", cmd)
	case "SUB":
		cmd.Kind = CmdSub
		if len(params) < 2 {
			return 0, fatalf("E_INVALID", "SUB insufficient number of parameters")
		}
		cmd.Topic, cmd.Channel = params[0], params[1]
		if !ValidTopicName(cmd.Topic) {
			return 0, fatalf("E_BAD_TOPIC", "SUB topic name %q is not valid", cmd.Topic)
		}
		if !ValidChannelName(cmd.Channel) {
			return 0, fatalf("E_BAD_CHANNEL", "SUB channel name %q is not valid", cmd.Channel)
		}
	case "RDY":
		cmd.Kind, cmd.Count = CmdRdy, 1
		if len(params) > 0 {
			v, ok := atoi(params[0])
			if !ok {
				return 0, fatalf("E_INVALID", "RDY could not parse count %s", params[0])
			}
			cmd.Count = v
		}
	case "FIN", "TOUCH":
		cmd.Kind = CmdFin
		if name[0] == 'T' {
			cmd.Kind = CmdTouch
		}
		if len(params) < 1 {
			return 0, fatalf("E_INVALID", "%s insufficient number of params", name)
		}
		if len(params[0]) != MsgIDLength {
			return 0, fatalf("E_INVALID", "invalid message ID")
		}
		cmd.ID = params[0]
	case "REQ":
		cmd.Kind = CmdReq
		if len(params) < 2 {
			return 0, fatalf("E_INVALID", "REQ insufficient number of params")
		}
		if len(params[0]) != MsgIDLength {
			return 0, fatalf("E_INVALID", "invalid message ID")
		}
		ms, ok := atoi(params[1])
		if !ok {
			return 0, fatalf("E_INVALID", "REQ could not parse timeout %s", params[1])
		}
		cmd.ID, cmd.Delay = params[0], msDuration(ms)
	case "NOP":
		cmd.Kind = CmdNop
	case "CLS":
		cmd.Kind = CmdCls
	case "PUB":
		cmd.Kind = CmdPub
		if err := publishTopic(cmd, params, 1, "PUB"); err != nil {
			return 0, err
		}
		return withBody(buf, n, lim.MaxMsgSize, "E_BAD_MESSAGE", "PUB", cmd)
	case "DPUB":
		cmd.Kind = CmdDpub
		if err := publishTopic(cmd, params, 2, "DPUB"); err != nil {
			return 0, err
		}
		ms, ok := atoi(params[1])
		if !ok {
			return 0, fatalf("E_INVALID", "DPUB could not parse timeout %s", params[1])
		}
		cmd.Delay = msDuration(ms)
		return withBody(buf, n, lim.MaxMsgSize, "E_BAD_MESSAGE", "DPUB", cmd)
	case "MPUB":
		cmd.Kind = CmdMpub
		if err := publishTopic(cmd, params, 1, "MPUB"); err != nil {
			return 0, err
		}
		m, err := withBody(buf, n, lim.MaxBodySize, "E_BAD_BODY", "MPUB", cmd)
		if m == 0 || err != nil {
			return m, err
		}
		if err := splitMPUB(cmd, lim); err != nil {
			return 0, err
		}
		return m, nil
	default:
		return 0, fatalf("E_INVALID", "invalid command %q", truncate(name, 32))
	}
	return n, nil
}

// publishTopic checks a publishing command's parameter count and sets its
// topic, with the error texts nsqd gives.
func publishTopic(cmd *Command, params [][]byte, need int, what string) error {
	if len(params) < need {
		return fatalf("E_INVALID", "%s insufficient number of parameters", what)
	}
	cmd.Topic = params[0]
	if !ValidTopicName(cmd.Topic) {
		return fatalf("E_BAD_TOPIC", "%s topic name %q is not valid", what, cmd.Topic)
	}
	return nil
}

// withBody reads the size-prefixed body after the command line at buf[n:].
func withBody(buf []byte, n, max int, code, what string, cmd *Command) (int, error) {
	if len(buf) < n+4 {
		return 0, nil
	}
	size := int32(binary.BigEndian.Uint32(buf[n:]))
	if size <= 0 {
		return 0, fatalf(code, "%s invalid body size %d", what, size)
	}
	if int(size) > max {
		return 0, fatalf(code, "%s body too big %d > %d", what, size, max)
	}
	end := n + 4 + int(size)
	if len(buf) < end {
		return 0, nil
	}
	cmd.Body = buf[n+4 : end]
	return end, nil
}

// splitMPUB splits an MPUB body: a message count, then each message as size
// and bytes, filling the body exactly.
func splitMPUB(cmd *Command, lim Limits) error {
	b := cmd.Body
	if len(b) < 4 {
		return fatalf("E_BAD_BODY", "MPUB failed to read message count")
	}
	count := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	maxMsgs := (lim.MaxBodySize - 4) / 5
	if lim.MaxMessages > 0 {
		maxMsgs = min(maxMsgs, lim.MaxMessages)
	}
	if count <= 0 || int(count) > maxMsgs {
		return fatalf("E_BAD_BODY", "MPUB invalid message count %d", count)
	}
	for i := int32(0); i < count; i++ {
		if len(b) < 4 {
			return fatalf("E_BAD_MESSAGE", "MPUB failed to read message(%d) body size", i)
		}
		size := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if size <= 0 {
			return fatalf("E_BAD_MESSAGE", "MPUB invalid message(%d) body size %d", i, size)
		}
		if int(size) > lim.MaxMsgSize {
			return fatalf("E_BAD_MESSAGE", "MPUB message too big %d > %d", size, lim.MaxMsgSize)
		}
		if int(size) > len(b) {
			return fatalf("E_BAD_MESSAGE", "MPUB failed to read message(%d) body", i)
		}
		cmd.Bodies = append(cmd.Bodies, b[:size])
		b = b[size:]
	}
	if len(b) != 0 {
		return fatalf("E_BAD_BODY", "MPUB body has %d bytes after its %d messages", len(b), count)
	}
	return nil
}

// fields splits on single spaces, as nsqd does, dropping empty fields; at
// most len(buf) of them (no command takes more), without allocating.
func fields(b []byte, buf *[4][]byte) [][]byte {
	out := buf[:0]
	for len(b) > 0 && len(out) < len(buf) {
		var f []byte
		f, b, _ = bytes.Cut(b, []byte(" "))
		if len(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// atoi parses a non-negative decimal number of at most 18 digits.
func atoi(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func msDuration(ms int64) time.Duration {
	const max = int64(1<<63-1) / int64(time.Millisecond)
	if ms > max {
		ms = max
	}
	return time.Duration(ms) * time.Millisecond
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// ValidTopicName reports whether name is a valid NSQ topic name:
// 1-64 bytes of [.a-zA-Z0-9_-], optionally ending in "#ephemeral".
func ValidTopicName(name []byte) bool { return validName(name) }

// ValidChannelName is the same rule for channels.
func ValidChannelName(name []byte) bool { return validName(name) }

func validName(name []byte) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	name, _ = bytes.CutSuffix(name, []byte("#ephemeral"))
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// AppendFrame writes one frame: size (of type and data), type, data.
func AppendFrame(dst []byte, frameType int32, data []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+len(data)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(frameType))
	return append(dst, data...)
}

// AppendMessage writes a message frame: timestamp (unix ns), attempts, ID
// and body.
func AppendMessage(dst []byte, ts int64, attempts uint16, id *[MsgIDLength]byte, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+8+2+MsgIDLength+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(FrameMessage))
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	dst = binary.BigEndian.AppendUint16(dst, attempts)
	dst = append(dst, id[:]...)
	return append(dst, body...)
}

// MessageSize is the frame size AppendMessage writes for a body of n bytes.
func MessageSize(n int) int { return 8 + 8 + 2 + MsgIDLength + n }

// FormatID writes seq as 16 lower-case hex digits, as nsqd's IDs look.
func FormatID(seq uint64) [MsgIDLength]byte {
	const hex = "0123456789abcdef"
	var id [MsgIDLength]byte
	for i := MsgIDLength - 1; i >= 0; i-- {
		id[i] = hex[seq&0xf]
		seq >>= 4
	}
	return id
}

// ParseID reads what FormatID wrote.
func ParseID(b []byte) (uint64, bool) {
	if len(b) != MsgIDLength {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(v)
	}
	return n, true
}
