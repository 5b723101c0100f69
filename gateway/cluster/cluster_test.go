package cluster

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

func TestFrameRoundTripAndLimits(t *testing.T) {
	var stream []byte
	bodies := [][]byte{nil, []byte("x"), bytes.Repeat([]byte{7}, MaxHandshakeFrame)}
	for i, b := range bodies {
		stream = AppendFrame(stream, Type(i+5), b)
	}
	// Decode from every split point: a prefix is truncated, never wrong.
	for cut := 0; cut < len(stream); cut++ {
		_, _, err := DecodeFrame(stream[:min(cut, frameHeaderLen+1)])
		if err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
	r := NewReader(bytes.NewReader(stream))
	for i, want := range bodies {
		f, err := r.Read()
		if err != nil || f.Type != Type(i+5) || !bytes.Equal(f.Body, want) {
			t.Fatalf("frame %d: %v %v", i, f.Type, err)
		}
	}
	bad := []struct {
		name string
		b    []byte
		want error
	}{
		{"magic", []byte("GET / HTTP/1.1\r\n"), ErrBadMagic},
		{"type 0", AppendFrame(nil, 0, nil), ErrUnknownType},
		{"type 200", AppendFrame(nil, 200, nil), ErrUnknownType},
		{"too big", append([]byte("EQP2\x05"), 0xff, 0xff, 0xff, 0xff), ErrFrameTooBig},
		{"too big before auth", append([]byte("EQP2\x01"), 0, 0, 0x10, 0x01), ErrFrameTooBig},
		{"old protocol", []byte("EQP1\x01\x00\x00\x00\x00"), ErrBadMagic},
		{"short body", AppendFrame(nil, TypeHeartbeat, []byte("abc"))[:10], ErrTruncated},
	}
	for _, c := range bad {
		if _, _, err := DecodeFrame(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if _, err := NewReader(bytes.NewReader(c.b)).Read(); err == nil {
			t.Errorf("%s: reader accepted it", c.name)
		}
	}
}

func handshake(t *testing.T, dialer, listener Identity) (Peer, Peer, error, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	type res struct {
		p   Peer
		err error
	}
	ch := make(chan res, 1)
	go func() {
		p, err := Accept(b, listener)
		if err != nil {
			b.Close() // as a server would: the dialer sees the refusal, then EOF
		}
		ch <- res{p, err}
	}()
	dp, derr := Dial(a, dialer)
	if derr != nil {
		a.Close()
	}
	lr := <-ch
	return dp, lr.p, derr, lr.err
}

func TestHandshake(t *testing.T) {
	secret := []byte("correct horse battery staple")
	a := Identity{Cluster: "plant", Node: "gw-a", Secret: secret}
	b := Identity{Cluster: "plant", Node: "gw-b", Secret: secret}
	dp, lp, derr, lerr := handshake(t, a, b)
	if derr != nil || lerr != nil || dp.Node != "gw-b" || lp.Node != "gw-a" {
		t.Fatalf("good handshake: %v %v %+v %+v", derr, lerr, dp, lp)
	}
	cases := []struct {
		name         string
		dialer, lstn Identity
		want         error
	}{
		{"wrong secret", Identity{"plant", "gw-x", []byte("guess")}, b, ErrAuthFailed},
		{"listener has another secret", a, Identity{"plant", "gw-y", []byte("other")}, ErrAuthFailed},
		{"other cluster", Identity{"office", "gw-o", secret}, b, ErrOtherCluster},
		{"same node id", Identity{"plant", "gw-b", secret}, b, ErrAuthFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, derr, lerr := handshake(t, c.dialer, c.lstn)
			if derr == nil || lerr == nil {
				t.Fatalf("accepted: dialer %v, listener %v", derr, lerr)
			}
			if !IsRefusal(derr) && !IsRefusal(lerr) {
				t.Fatalf("not counted as a refusal: %v / %v", derr, lerr)
			}
			if !errors.Is(derr, c.want) && !errors.Is(lerr, c.want) {
				t.Fatalf("errors %v / %v, want %v on one side", derr, lerr, c.want)
			}
		})
	}
}

func TestKeysBindEverything(t *testing.T) {
	s := []byte("s")
	n1, n2 := bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen)
	k := func(secret []byte, c, d, l string, nd, nl []byte) linkKeys {
		t.Helper()
		keys, err := deriveKeys(secret, c, d, l, nd, nl, true)
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	base := k(s, "c", "a", "b", n1, n2)
	lst, err := deriveKeys(s, "c", "a", "b", n1, n2, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(base.send, lst.recv) || !bytes.Equal(base.recv, lst.send) || bytes.Equal(base.send, base.recv) {
		t.Fatal("direction keys do not pair up, or both directions share a key")
	}
	if bytes.Equal(proof(base, "dialer"), proof(base, "listener")) {
		t.Fatal("a proof can be reflected")
	}
	variants := []linkKeys{
		k(s, "c2", "a", "b", n1, n2),
		k(s, "c", "b", "a", n1, n2),
		k(s, "c", "a", "b", n2, n1), // replay with other nonces
		k(s, "c", "a", "b", n1, n1),
		k([]byte("t"), "c", "a", "b", n1, n2),
	}
	for i, v := range variants {
		if bytes.Equal(v.send, base.send) || bytes.Equal(v.recv, base.recv) || bytes.Equal(proof(v, "dialer"), proof(base, "dialer")) {
			t.Fatalf("variant %d gives the same keys", i)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, TypeHello, hello("c", "n", make([]byte, nonceLen), nil)))
	f.Add(AppendFrame(nil, TypeHeartbeat, nil))
	f.Add([]byte("EQP2"))
	f.Add([]byte("EQP2\x0b\x00\x00\x00\x05abc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := DecodeFrame(b)
		if err != nil {
			return
		}
		if n > len(b) || len(fr.Body) > MaxHandshakeFrame || n != frameHeaderLen+len(fr.Body) {
			t.Fatalf("decoded %d of %d bytes, body %d", n, len(b), len(fr.Body))
		}
		if !bytes.Equal(AppendFrame(nil, fr.Type, fr.Body), b[:n]) {
			t.Fatal("re-encoding differs")
		}
		// Hello bodies never panic the parser.
		_, _ = parseHello(fr.Body, true)
	})
}
