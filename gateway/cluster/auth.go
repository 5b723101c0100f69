package cluster

import (
	"bytes"
	"crypto/hkdf"
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

// Peer is the authenticated other side of a connection, with the keys of
// the link: every frame after the handshake is sealed with them.
type Peer struct {
	Node string
	keys linkKeys
}

const (
	nonceLen     = 32
	maxNameField = 256
	keyLen       = 32
	protoLabel   = "edgeq-peer-v2"
)

// linkKeys are derived from the cluster secret and the handshake. send and
// recv are this side's direction keys (the dialer's send is the listener's
// recv), confirm keys the two proofs.
type linkKeys struct {
	confirm, send, recv []byte
}

// deriveKeys is HKDF-SHA256 with the cluster secret as input keying material
// and a hash of everything the handshake said as salt: both nonces (fresh
// per connection, so keys never repeat and a recorded session replays into
// nothing), both node IDs, the cluster and the protocol version.
func deriveKeys(secret []byte, cluster, dialer, listener string, dialerNonce, listenerNonce []byte, isDialer bool) (linkKeys, error) {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(protoLabel), []byte(cluster), []byte(dialer), []byte(listener), dialerNonce, listenerNonce} {
		h.Write(appendField(nil, part))
	}
	prk, err := hkdf.Extract(sha256.New, secret, h.Sum(nil))
	if err != nil {
		return linkKeys{}, fmt.Errorf("cluster: derive keys: %w", err)
	}
	var k [3][]byte
	for i, info := range []string{"confirm", "dialer to listener", "listener to dialer"} {
		if k[i], err = hkdf.Expand(sha256.New, prk, protoLabel+" "+info, keyLen); err != nil {
			return linkKeys{}, fmt.Errorf("cluster: derive keys: %w", err)
		}
	}
	if isDialer {
		return linkKeys{confirm: k[0], send: k[1], recv: k[2]}, nil
	}
	return linkKeys{confirm: k[0], send: k[2], recv: k[1]}, nil
}

// proof is one side's key confirmation: only a holder of the secret who saw
// both nonces can compute it; the role keeps it from being reflected back.
func proof(k linkKeys, role string) []byte {
	m := hmac.New(sha256.New, k.confirm)
	m.Write([]byte(role))
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
		return f, fmt.Errorf("%w: %.200q", ErrRefused, f.Body)
	}
	if f.Type != t {
		return f, fmt.Errorf("%w: %d during the handshake", ErrUnexpected, f.Type)
	}
	return f, nil
}

// Dial runs the dialer's side of the handshake on an open connection (the
// caller sets deadlines). It returns the authenticated peer.
//
//	dialer → listener  HELLO     cluster, node, dialer nonce
//	listener → dialer  HELLOACK  cluster, node, listener nonce, listener proof
//	dialer → listener  AUTH      dialer proof
//	listener → dialer  HEARTBEAT (accepted) or REFUSED
//
// Each proof is computed only after its sender saw both nonces, from keys
// that bind both nonces, both node IDs, the cluster and the secret; every
// frame after the handshake is sealed with direction keys from the same
// derivation (seal.go), so a relay that completes the handshake by passing
// it through can neither read nor inject, drop, reorder or replay a frame.
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
	k, err := deriveKeys(id.Secret, id.Cluster, id.Node, h.node, myNonce, h.nonce, true)
	if err != nil {
		return Peer{}, err
	}
	if !hmac.Equal(proof(k, "listener"), h.mac) {
		refuse(rw, "authentication failed")
		return Peer{}, fmt.Errorf("%w: listener %q has another secret", ErrAuthFailed, h.node)
	}
	if err := writeFrame(rw, TypeAuth, appendField(nil, proof(k, "dialer"))); err != nil {
		return Peer{}, err
	}
	// The listener answers once it has accepted us, so a refusal is seen
	// here and not on the first real message. This answer is not sealed (a
	// refusal must be readable); a forged one gains nothing, as everything
	// after it is.
	if _, err := expect(r, TypeHeartbeat); err != nil {
		return Peer{}, err
	}
	return Peer{Node: h.node, keys: k}, nil
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
	k, err := deriveKeys(id.Secret, id.Cluster, h.node, id.Node, h.nonce, myNonce, false)
	if err != nil {
		return Peer{}, err
	}
	if err := writeFrame(rw, TypeHelloAck, hello(id.Cluster, id.Node, myNonce, proof(k, "listener"))); err != nil {
		return Peer{}, err
	}
	f, err = expect(r, TypeAuth)
	if err != nil {
		return Peer{}, err
	}
	fl := fields{b: f.Body}
	theirs := fl.next(sha256.Size)
	if fl.err != nil || !hmac.Equal(proof(k, "dialer"), theirs) {
		refuse(rw, "authentication failed")
		return Peer{}, fmt.Errorf("%w: dialer %q has another secret", ErrAuthFailed, h.node)
	}
	if err := writeFrame(rw, TypeHeartbeat, nil); err != nil {
		return Peer{}, err
	}
	return Peer{Node: h.node, keys: k}, nil
}

// IsRefusal reports whether err is the peer or us refusing the connection for
// cluster or authentication reasons (counted separately from network errors).
func IsRefusal(err error) bool {
	return errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrOtherCluster) || errors.Is(err, ErrRefused)
}
