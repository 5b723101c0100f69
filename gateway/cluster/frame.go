package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Handshake frame layout: 4 bytes "EQP2" (magic and protocol version), 1
// byte type, 4 bytes big-endian body length, body. Handshake frames are
// bounded by MaxHandshakeFrame; the frames after it are sealed (seal.go) and
// bounded by MaxFrame.
const (
	frameHeaderLen = 9
	// MaxFrame is the largest frame body accepted (a FETCH answer is the
	// biggest: read-ahead bytes plus framing).
	MaxFrame = 8 << 20
	// MaxHandshakeFrame bounds a frame before authentication: nothing
	// larger is allocated for a peer that has not proven anything.
	MaxHandshakeFrame = 4 << 10
)

// EQP1 was the unencrypted protocol: its nodes are refused as "bad magic or
// protocol version".
var frameMagic = [4]byte{'E', 'Q', 'P', '2'}

// Type says what a frame carries.
type Type uint8

// Frame types. The handshake comes first on every connection.
const (
	TypeHello      Type = 1 // dialer → listener: cluster, node, nonce
	TypeHelloAck   Type = 2 // listener → dialer: cluster, node, nonce, proof
	TypeAuth       Type = 3 // dialer → listener: proof
	TypeRefused    Type = 4 // either side: why the connection is refused
	TypeHeartbeat  Type = 5
	TypeElection   Type = 6  // election messages (discovery/election)
	TypeFetch      Type = 7  // leader → owner: FetchReq
	TypeFetched    Type = 8  // owner → leader: FetchResp
	TypeForward    Type = 9  // leader → member's node: Forward
	TypeAck        Type = 10 // member's node → leader: AckRelay
	TypeCommit     Type = 11 // leader → owner: CommitReq
	TypeMembers    Type = 12 // any node → peers: Members
	TypePosition   Type = 13 // leader → owner: PositionReq
	TypePositioned Type = 14 // owner → leader: PositionResp
	TypeCommitted  Type = 15 // owner → leader: CommitResp
	TypeRemoved    Type = 16 // any node → peers: GroupName of a group deleted on demand
	maxType        Type = TypeRemoved
)

// Errors of the framing.
var (
	ErrBadMagic     = errors.New("cluster: not an edgeq peer (bad magic or protocol version)")
	ErrFrameTooBig  = errors.New("cluster: frame too large")
	ErrUnknownType  = errors.New("cluster: unknown frame type")
	ErrTruncated    = errors.New("cluster: truncated frame")
	ErrUnexpected   = errors.New("cluster: unexpected frame")
	ErrRefused      = errors.New("cluster: connection refused by peer")
	ErrAuthFailed   = errors.New("cluster: peer authentication failed")
	ErrOtherCluster = errors.New("cluster: peer belongs to another cluster")
)

// Frame is one decoded frame; Body aliases the reader's buffer until the next read.
type Frame struct {
	Type Type
	Body []byte
}

// AppendFrame encodes a frame onto dst.
func AppendFrame(dst []byte, t Type, body []byte) []byte {
	dst = append(dst, frameMagic[:]...)
	dst = append(dst, byte(t))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}

// DecodeFrame decodes one frame from the front of b and returns the bytes it
// used. ErrTruncated means more bytes are needed; other errors are fatal for
// the connection.
func DecodeFrame(b []byte) (Frame, int, error) {
	if len(b) < frameHeaderLen {
		if len(b) > 0 && !matchesMagicPrefix(b) {
			return Frame{}, 0, ErrBadMagic
		}
		return Frame{}, 0, ErrTruncated
	}
	if [4]byte(b[:4]) != frameMagic {
		return Frame{}, 0, ErrBadMagic
	}
	t := Type(b[4])
	if t == 0 || t > maxType {
		return Frame{}, 0, fmt.Errorf("%w: %d", ErrUnknownType, t)
	}
	n := binary.BigEndian.Uint32(b[5:9])
	if n > MaxHandshakeFrame {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes before authentication (max %d)", ErrFrameTooBig, n, MaxHandshakeFrame)
	}
	if len(b)-frameHeaderLen < int(n) {
		return Frame{}, 0, ErrTruncated
	}
	end := frameHeaderLen + int(n)
	return Frame{Type: t, Body: b[frameHeaderLen:end:end]}, end, nil
}

func matchesMagicPrefix(b []byte) bool {
	for i := 0; i < len(b) && i < 4; i++ {
		if b[i] != frameMagic[i] {
			return false
		}
	}
	return true
}

// Reader reads handshake frames from a stream into a reused buffer of at
// most MaxHandshakeFrame bytes; it never reads past the frame it returns,
// so the sealed frames after the handshake are left on the stream.
type Reader struct {
	r   io.Reader
	buf []byte
	hdr [frameHeaderLen]byte
}

// NewReader returns a frame reader.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Read reads the next frame; its Body is valid until the next Read.
func (fr *Reader) Read() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Frame{}, err
	}
	f, _, err := DecodeFrame(fr.hdr[:])
	if err != nil && !errors.Is(err, ErrTruncated) {
		return Frame{}, err
	}
	n := int(binary.BigEndian.Uint32(fr.hdr[5:9]))
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return Frame{}, ErrTruncated
		}
		return Frame{}, err
	}
	f.Type, f.Body = Type(fr.hdr[4]), fr.buf
	return f, nil
}

// fields is a tiny length-prefixed field codec for frame bodies.
type fields struct {
	b   []byte
	err error
}

func appendField(dst, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (f *fields) next(max int) []byte {
	if f.err != nil {
		return nil
	}
	n, k := binary.Uvarint(f.b)
	if k <= 0 || n > uint64(max) || n > uint64(len(f.b)-k) {
		f.err = fmt.Errorf("%w: bad field", ErrTruncated)
		return nil
	}
	v := f.b[k : k+int(n)]
	f.b = f.b[k+int(n):]
	return v
}
