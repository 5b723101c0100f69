package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// Identity is what a node presents to its peers.
type Identity struct {
	Cluster string // cluster name: a node of another cluster is refused
	Node    string // node ID
	Secret  []byte // shared cluster secret
}

// Peer is the authenticated other side of a connection.
type Peer struct {
	Node string
}

const (
	nonceLen     = 32
	maxNameField = 256
)

// The proofs bind both nonces, both node IDs, the cluster and the role, so a
// proof can be neither replayed on another connection nor reflected back.
func proof(secret []byte, role, cluster, dialer, listener string, dialerNonce, listenerNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, part := range [][]byte{[]byte("edgeq-peer-v1"), []byte(role), []byte(cluster), []byte(dialer), []byte(listener), dialerNonce, listenerNonce} {
		m.Write(appendField(nil, part))
	}
	return m.Sum(nil)
}

func newNonce() ([]byte, error) {
	n := make([]byte, nonceLen)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("cluster: nonce: %w", err)
	}
	return n, nil
}

func hello(cluster, node string, nonce, mac []byte) []byte {
	b := appendField(nil, []byte(cluster))
	b = appendField(b, []byte(node))
	b = appendField(b, nonce)
	return appendField(b, mac)
}

type helloMsg struct {
	cluster, node string
	nonce, mac    []byte
}

func parseHello(body []byte, withMAC bool) (helloMsg, error) {
	f := fields{b: body}
	// Copies: the body aliases the reader's buffer, reused by the next frame.
	h := helloMsg{cluster: string(f.next(maxNameField)), node: string(f.next(maxNameField)), nonce: bytes.Clone(f.next(nonceLen))}
	h.mac = bytes.Clone(f.next(sha256.Size))
	if f.err != nil || len(h.nonce) != nonceLen || h.node == "" || (withMAC && len(h.mac) != sha256.Size) {
		return h, fmt.Errorf("%w: malformed hello", ErrAuthFailed)
	}
	return h, nil
}

func writeFrame(w io.Writer, t Type, body []byte) error {
	_, err := w.Write(AppendFrame(nil, t, body))
	return err
}

func refuse(w io.Writer, reason string) {
	_ = writeFrame(w, TypeRefused, []byte(reason))
}

// expect reads the next frame and checks its type; a Refused frame becomes
// an error carrying the peer's reason.
func expect(r *Reader, t Type) (Frame, error) {
	f, err := r.Read()
	if err != nil {
		return f, err
	}
	if f.Type == TypeRefused {
		return f, fmt.Errorf("%w: %s", ErrRefused, f.Body)
	}
	if f.Type != t {
		return f, fmt.Errorf("%w: %d during the handshake", ErrUnexpected, f.Type)
	}
	return f, nil
}

// Dial runs the dialer's side of the handshake on an open connection (the
// caller sets deadlines). It returns the authenticated peer.
func Dial(rw io.ReadWriter, id Identity) (Peer, error) {
	r := NewReader(rw)
	myNonce, err := newNonce()
	if err != nil {
		return Peer{}, err
	}
	if err := writeFrame(rw, TypeHello, hello(id.Cluster, id.Node, myNonce, nil)); err != nil {
		return Peer{}, err
	}
	f, err := expect(r, TypeHelloAck)
	if err != nil {
		return Peer{}, err
	}
	h, err := parseHello(f.Body, true)
	if err != nil {
		return Peer{}, err
	}
	if h.cluster != id.Cluster {
		refuse(rw, "other cluster")
		return Peer{}, fmt.Errorf("%w: %q", ErrOtherCluster, h.cluster)
	}
	if h.node == id.Node {
		refuse(rw, "same node id")
		return Peer{}, fmt.Errorf("%w: peer has our own node id %q", ErrAuthFailed, h.node)
	}
	want := proof(id.Secret, "listener", id.Cluster, id.Node, h.node, myNonce, h.nonce)
	if !hmac.Equal(want, h.mac) {
		refuse(rw, "authentication failed")
		return Peer{}, fmt.Errorf("%w: listener %q has another secret", ErrAuthFailed, h.node)
	}
	mine := proof(id.Secret, "dialer", id.Cluster, id.Node, h.node, myNonce, h.nonce)
	if err := writeFrame(rw, TypeAuth, appendField(nil, mine)); err != nil {
		return Peer{}, err
	}
	// The listener answers a heartbeat once it has accepted us, so a refusal
	// is seen here and not on the first real message.
	if _, err := expect(r, TypeHeartbeat); err != nil {
		return Peer{}, err
	}
	return Peer{Node: h.node}, nil
}

// Accept runs the listener's side of the handshake. A refused dialer is told
// why (other cluster, authentication failed) before the error is returned.
func Accept(rw io.ReadWriter, id Identity) (Peer, error) {
	r := NewReader(rw)
	f, err := expect(r, TypeHello)
	if err != nil {
		return Peer{}, err
	}
	h, err := parseHello(f.Body, false)
	if err != nil {
		refuse(rw, "malformed hello")
		return Peer{}, err
	}
	if h.cluster != id.Cluster {
		refuse(rw, "other cluster")
		return Peer{}, fmt.Errorf("%w: %q from %q", ErrOtherCluster, h.cluster, h.node)
	}
	if h.node == id.Node {
		refuse(rw, "same node id")
		return Peer{}, fmt.Errorf("%w: dialer has our own node id %q", ErrAuthFailed, h.node)
	}
	myNonce, err := newNonce()
	if err != nil {
		return Peer{}, err
	}
	mine := proof(id.Secret, "listener", id.Cluster, h.node, id.Node, h.nonce, myNonce)
	if err := writeFrame(rw, TypeHelloAck, hello(id.Cluster, id.Node, myNonce, mine)); err != nil {
		return Peer{}, err
	}
	f, err = expect(r, TypeAuth)
	if err != nil {
		return Peer{}, err
	}
	fl := fields{b: f.Body}
	theirs := fl.next(sha256.Size)
	want := proof(id.Secret, "dialer", id.Cluster, h.node, id.Node, h.nonce, myNonce)
	if fl.err != nil || !hmac.Equal(want, theirs) {
		refuse(rw, "authentication failed")
		return Peer{}, fmt.Errorf("%w: dialer %q has another secret", ErrAuthFailed, h.node)
	}
	if err := writeFrame(rw, TypeHeartbeat, nil); err != nil {
		return Peer{}, err
	}
	return Peer{Node: h.node}, nil
}

// IsRefusal reports whether err is the peer or us refusing the connection for
// cluster or authentication reasons (counted separately from network errors).
func IsRefusal(err error) bool {
	return errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrOtherCluster) || errors.Is(err, ErrRefused)
}
