package cluster

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
)

// After the handshake every frame is a sealed record: 4 bytes big-endian
// length n, then n bytes of ChaCha20-Poly1305 ciphertext of (type, body)
// with its 16-byte tag. The length is the associated data; the nonce is a
// per-direction counter (4 zero bytes, 8 bytes big-endian), never sent:
// a dropped, injected, reordered, replayed or altered record fails to open
// and the connection is closed. ChaCha20-Poly1305 rather than AES-GCM
// because the Raspberry Pi 4 and arm v7 gateways have no AES instructions.
const (
	sealHeaderLen = 4
	tagLen        = chacha20poly1305.Overhead
	// maxSealed is the largest record accepted from an authenticated peer.
	maxSealed = 1 + MaxFrame + tagLen
)

// ErrFrameAuth: a sealed frame failed to open.
var ErrFrameAuth = errors.New("cluster: frame authentication failed (altered, injected, dropped, reordered or replayed)")

var zeroTag [tagLen]byte

// appendQueued appends a frame to a send queue in the layout sealAll seals
// in place: the record header, type, body and room for the tag.
func appendQueued(dst []byte, t Type, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+len(body)+tagLen))
	dst = append(dst, byte(t))
	dst = append(dst, body...)
	return append(dst, zeroTag[:]...)
}

// queuedLen is the size of a frame in a send queue, and on the wire.
func queuedLen(body []byte) int { return sealHeaderLen + 1 + len(body) + tagLen }

type counterNonce struct {
	seq uint64
	n   [chacha20poly1305.NonceSize]byte
}

func (c *counterNonce) next() ([]byte, error) {
	if c.seq == ^uint64(0) {
		return nil, errors.New("cluster: frame counter exhausted")
	}
	binary.BigEndian.PutUint64(c.n[4:], c.seq)
	c.seq++
	return c.n[:], nil
}

// sealer seals the frames one side sends.
type sealer struct {
	aead  cipher.AEAD
	nonce counterNonce
}

func newSealer(key []byte) (*sealer, error) {
	a, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("cluster: sealer: %w", err)
	}
	return &sealer{aead: a}, nil
}

// sealAll seals, in place and in order, every frame appendQueued put in buf.
func (s *sealer) sealAll(buf []byte) error {
	for off := 0; off < len(buf); {
		if len(buf)-off < sealHeaderLen {
			return errors.New("cluster: send queue corrupt")
		}
		n := int(binary.BigEndian.Uint32(buf[off:]))
		end := off + sealHeaderLen + n
		if n < 1+tagLen || end > len(buf) {
			return errors.New("cluster: send queue corrupt")
		}
		nonce, err := s.nonce.next()
		if err != nil {
			return err
		}
		pt := buf[off+sealHeaderLen : end-tagLen]
		s.aead.Seal(pt[:0], nonce, pt, buf[off:off+sealHeaderLen])
		off = end
	}
	return nil
}

// opener reads and opens the sealed frames of one connection.
type opener struct {
	r     io.Reader
	aead  cipher.AEAD
	nonce counterNonce
	hdr   [sealHeaderLen]byte
	buf   []byte
}

func newOpener(r io.Reader, key []byte) (*opener, error) {
	a, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("cluster: opener: %w", err)
	}
	return &opener{r: r, aead: a}, nil
}

// Read reads and opens the next frame; its Body is valid until the next
// Read. It also returns the record's size on the wire. ErrFrameAuth (and
// ErrFrameTooBig, a length no honest peer sends) mean tampering.
func (o *opener) Read() (Frame, int, error) {
	if _, err := io.ReadFull(o.r, o.hdr[:]); err != nil {
		return Frame{}, 0, err
	}
	n := int(binary.BigEndian.Uint32(o.hdr[:]))
	if n < 1+tagLen || n > maxSealed {
		return Frame{}, 0, fmt.Errorf("%w: sealed record of %d bytes", ErrFrameTooBig, n)
	}
	if cap(o.buf) < n {
		o.buf = make([]byte, n)
	}
	o.buf = o.buf[:n]
	if _, err := io.ReadFull(o.r, o.buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return Frame{}, 0, ErrTruncated
		}
		return Frame{}, 0, err
	}
	nonce, err := o.nonce.next()
	if err != nil {
		return Frame{}, 0, err
	}
	pt, err := o.aead.Open(o.buf[:0], nonce, o.buf, o.hdr[:])
	if err != nil {
		return Frame{}, 0, ErrFrameAuth
	}
	f := Frame{Type: Type(pt[0]), Body: pt[1:]}
	if cap(o.buf) > 1<<20 && n < 64<<10 {
		o.buf = nil // a burst grew the buffer: let it go
	}
	if f.Type <= TypeRefused || f.Type > maxType {
		// Authentic, so not tampering: a peer speaking another version.
		return Frame{}, 0, fmt.Errorf("%w: %d after the handshake", ErrUnknownType, f.Type)
	}
	return f, sealHeaderLen + n, nil
}

// isTampering reports whether a read error means the stream was altered.
func isTampering(err error) bool {
	return errors.Is(err, ErrFrameAuth) || errors.Is(err, ErrFrameTooBig)
}
