package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testKeys(t testing.TB) (dialer, listener linkKeys) {
	t.Helper()
	n1, n2 := bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen)
	d, err := deriveKeys([]byte(secret), "plant", "a", "b", n1, n2, true)
	if err != nil {
		t.Fatal(err)
	}
	l, err := deriveKeys([]byte(secret), "plant", "a", "b", n1, n2, false)
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

// sealedStream seals frames with the dialer's send key and returns the
// records one by one.
func sealedStream(t testing.TB, k linkKeys, bodies ...string) [][]byte {
	t.Helper()
	s, err := newSealer(k.send)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for i, b := range bodies {
		q := appendQueued(nil, Type(int(TypeElection)+i%8), []byte(b))
		if err := s.sealAll(q); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, q)
	}
	return recs
}

func readAll(t testing.TB, k linkKeys, stream []byte) ([]string, error) {
	t.Helper()
	o, err := newOpener(bytes.NewReader(stream), k.recv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		f, _, err := o.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
		got = append(got, string(f.Body))
	}
}

// TestSealedFramesRefuseTampering: the listener opens what the dialer
// sealed; every bit flip, a dropped, duplicated (replayed) or swapped record,
// a record of another session, and a truncated one are refused.
func TestSealedFramesRefuseTampering(t *testing.T) {
	d, l := testKeys(t)
	recs := sealedStream(t, d, "one", "two", "three")
	join := func(rs ...[]byte) []byte { return bytes.Join(rs, nil) }
	got, err := readAll(t, l, join(recs...))
	if err != nil || fmt.Sprint(got) != "[one two three]" {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if bytes.Contains(join(recs...), []byte("three")) {
		t.Fatal("plaintext on the wire")
	}
	if _, err := readAll(t, d, recs[0]); !errors.Is(err, ErrFrameAuth) {
		t.Fatalf("a record opened with the key of the other direction: %v", err)
	}
	other, _ := testKeys(t)
	other.send = bytes.Repeat([]byte{9}, keyLen)
	cases := map[string][]byte{
		"dropped":  join(recs[0], recs[2]),
		"replayed": join(recs[0], recs[0]),
		"swapped":  join(recs[1], recs[0]),
		"injected": join(recs[0], sealedStream(t, other, "evil")[0], recs[1]),
	}
	for name, stream := range cases {
		if _, err := readAll(t, l, stream); !errors.Is(err, ErrFrameAuth) {
			t.Errorf("%s: %v, want ErrFrameAuth", name, err)
		}
	}
	whole := join(recs...)
	for bit := 0; bit < len(whole)*8; bit++ {
		b := bytes.Clone(whole)
		b[bit/8] ^= 1 << (bit % 8)
		got, err := readAll(t, l, b)
		if err == nil || !isTampering(err) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("bit %d flipped: read %v, err %v", bit, got, err)
		}
	}
	if _, err := readAll(t, l, whole[:len(whole)-1]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
}

// relay sits between a dialer (it listens) and a listener (it dials) and
// hands every frame it passes to hook, which returns what to forward
// instead (nil drops). dir 0 is dialer → listener. It parses the four
// handshake frames, then sealed records: it sees the bytes, never the keys.
type relay struct {
	ln     net.Listener
	target string
	hook   func(dir, idx int, frame []byte) [][]byte
	// record keeps what the dialer sent on the first connection.
	mu       sync.Mutex
	recorded []byte
	conns    atomic.Int64
}

func startRelay(t *testing.T, target string, hook func(dir, idx int, frame []byte) [][]byte) *relay {
	t.Helper()
	r := &relay{target: target, hook: hook}
	r.ln = serveLoopback(t, r.serve)
	return r
}

// serveLoopback listens on a loopback port and runs serve for every
// connection until the test ends.
func serveLoopback(t *testing.T, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln
}

func (r *relay) Addr() string { return r.ln.Addr().String() }

func (r *relay) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	first := r.conns.Add(1) == 1
	done := make(chan struct{}, 2)
	pipe := func(dir int, from, to net.Conn) {
		defer func() { done <- struct{}{} }()
		for idx := 0; ; idx++ {
			frame, err := readRaw(from, idx < 2)
			if err != nil {
				return
			}
			if dir == 0 && first {
				r.mu.Lock()
				r.recorded = append(r.recorded, frame...)
				r.mu.Unlock()
			}
			out := [][]byte{frame}
			if r.hook != nil {
				out = r.hook(dir, idx, frame)
			}
			for _, o := range out {
				if _, err := to.Write(o); err != nil {
					return
				}
			}
		}
	}
	go pipe(0, c, up)
	go pipe(1, up, c)
	<-done
}

// readRaw reads one handshake frame or one sealed record, as bytes.
func readRaw(r io.Reader, handshake bool) ([]byte, error) {
	hl, lenAt := sealHeaderLen, 0
	if handshake {
		hl, lenAt = frameHeaderLen, 5
	}
	hdr := make([]byte, hl)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[lenAt:])
	if n > maxSealed {
		return nil, ErrFrameTooBig
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(hdr, body...), nil
}

func TestTransparentProxyWorks(t *testing.T) {
	b := startNode(t, "b", "plant", secret, 2)
	p := startRelay(t, b.m.Addr(), nil)
	a := startNode(t, "a", "plant", secret, 1, p.Addr())
	eventually(t, "a and b peers through the proxy", func() bool {
		_, ab := a.rec.isUp("b")
		_, ba := b.rec.isUp("a")
		return ab && ba
	})
	if err := a.m.Send("b", TypeMembers, []byte("via proxy")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "frame at b", func() bool {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		return len(b.rec.frames) == 1
	})
	if c := a.m.Counters(); c.FramesRefused != 0 || c.Refused != 0 {
		t.Fatalf("a transparent proxy caused refusals: %+v", c)
	}
}

// TestRelayCannotImpersonate is the attack of issue 13: a relay forwards
// HELLO and HELLOACK, drops the dialer's AUTH, answers "accepted" itself and
// then sends its own frames. The dialer never takes it for a peer, and the
// forged frames are refused and counted.
func TestRelayCannotImpersonate(t *testing.T) {
	b := startNode(t, "b", "plant", secret, 1000000)
	var forged [][]byte
	hb := binary.AppendVarint(nil, 1000000)
	hb = binary.AppendUvarint(hb, 10)
	hb = appendField(hb, []byte(b.m.Addr()))
	junk := make([]byte, 40)
	_, _ = rand.Read(junk)
	forged = append(forged,
		AppendFrame(nil, TypeHeartbeat, nil), // "accepted"
		appendQueued(nil, TypeHeartbeat, hb), // a heartbeat in the record layout, unsealed
		append(binary.BigEndian.AppendUint32(nil, uint32(len(junk))), junk...),
		AppendFrame(nil, TypeHeartbeat, hb), // a plaintext one
	)
	// The relay drops the dialer's AUTH and whatever the listener says
	// after HELLOACK; the injector in front of it answers the dialer.
	p := startRelay(t, b.m.Addr(), func(dir, idx int, frame []byte) [][]byte {
		if dir == 0 && idx == 1 || dir == 1 && idx >= 1 {
			return nil
		}
		return [][]byte{frame}
	})
	inj := startInjector(t, p.Addr(), forged)
	a := startNode(t, "a", "plant", secret, 1, inj.Addr())
	eventually(t, "forged frames refused", func() bool { return a.m.Counters().FramesRefused >= 2 })
	time.Sleep(300 * time.Millisecond)
	if _, ok := a.rec.isUp("b"); ok {
		t.Fatal("the relay became a peer")
	}
	if ps := a.m.Peers(); len(ps) != 0 {
		t.Fatalf("a lists peers: %+v", ps)
	}
	a.rec.mu.Lock()
	frames := len(a.rec.frames)
	a.rec.mu.Unlock()
	if frames != 0 {
		t.Fatalf("forged frames reached the handler: %d", frames)
	}
	if _, ok := b.rec.isUp("a"); ok {
		t.Fatal("b took the relay for a")
	}
	eventually(t, "b's unfinished handshakes fail", func() bool { return b.m.Counters().HandshakeFailures >= 1 })
}

// injector is a relay that, after the listener's HELLOACK reached the
// dialer, writes forged frames to the dialer.
type injector struct{ ln net.Listener }

func (i *injector) Addr() string { return i.ln.Addr().String() }

func startInjector(t *testing.T, target string, forged [][]byte) *injector {
	t.Helper()
	return &injector{ln: serveLoopback(t, func(c net.Conn) {
		defer c.Close()
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, c) }()
		if f, err := readRaw(up, true); err == nil { // HELLOACK
			_, _ = c.Write(f)
		}
		for _, f := range forged {
			time.Sleep(20 * time.Millisecond)
			_, _ = c.Write(f)
		}
		time.Sleep(time.Second)
	})}
}

// TestRelayTamperingClosesAndCounts: after an honest handshake, a relay that
// injects, replays, drops or flips a bit in one record gets the connection
// closed and counted; the tampered frame never reaches the handler, and the
// nodes reconnect (through the relay, now honest).
func TestRelayTamperingClosesAndCounts(t *testing.T) {
	for _, mode := range []string{"inject", "replay", "drop", "bitflip", "reorder"} {
		t.Run(mode, func(t *testing.T) {
			b := startNode(t, "b", "plant", secret, 2)
			var done atomic.Bool
			var held []byte
			var mu sync.Mutex
			p := startRelay(t, b.m.Addr(), func(dir, idx int, frame []byte) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				if dir != 0 || idx < 5 || done.Load() { // past the handshake and a few records
					return [][]byte{frame}
				}
				switch mode {
				case "inject":
					done.Store(true)
					junk := bytes.Clone(frame)
					_, _ = rand.Read(junk[sealHeaderLen:])
					return [][]byte{junk, frame}
				case "replay":
					if held == nil {
						held = frame
						return [][]byte{frame}
					}
					done.Store(true)
					return [][]byte{held, frame}
				case "drop":
					done.Store(true)
					return nil
				case "bitflip":
					done.Store(true)
					f := bytes.Clone(frame)
					f[len(f)-1] ^= 0x10
					return [][]byte{f}
				default: // reorder
					if held == nil {
						held = frame
						return nil
					}
					done.Store(true)
					return [][]byte{frame, held}
				}
			})
			a := startNode(t, "a", "plant", secret, 1, p.Addr())
			eventually(t, "b sees a", func() bool { _, ok := b.rec.isUp("a"); return ok })
			for i := 0; !done.Load() || i < 3; i++ {
				_ = a.m.Send("b", TypeMembers, []byte(fmt.Sprint("m", i)))
				time.Sleep(5 * time.Millisecond)
				if i > 2000 {
					t.Fatal("the relay never tampered")
				}
			}
			eventually(t, "tampering counted at b", func() bool { return b.m.Counters().FramesRefused == 1 })
			eventually(t, "a and b back up", func() bool { _, ok := b.rec.isUp("a"); return ok && a.m.Connected("b") })
			b.rec.mu.Lock()
			defer b.rec.mu.Unlock()
			seen := map[string]bool{}
			for _, f := range b.rec.frames {
				if seen[f] {
					t.Fatalf("frame delivered twice: %s", f)
				}
				seen[f] = true
			}
		})
	}
}

// TestReplayedSessionRefused: the bytes a dialer sent on a good session,
// replayed to the listener on a new connection, are refused (the
// listener's fresh nonce makes the recorded proof worthless).
func TestReplayedSessionRefused(t *testing.T) {
	b := startNode(t, "b", "plant", secret, 2)
	p := startRelay(t, b.m.Addr(), nil)
	a := startNode(t, "a", "plant", secret, 1, p.Addr())
	eventually(t, "a and b peers", func() bool { _, ok := b.rec.isUp("a"); return ok })
	_ = a.m.Send("b", TypeMembers, []byte("recorded"))
	time.Sleep(100 * time.Millisecond)
	a.cancel()
	a.m.Wait()
	eventually(t, "b sees a down", func() bool { _, ok := b.rec.isUp("a"); return !ok })
	p.mu.Lock()
	rec := bytes.Clone(p.recorded)
	p.mu.Unlock()
	before := b.m.Counters().Refused
	c, err := net.Dial("tcp", b.m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(rec)
	eventually(t, "replay refused", func() bool { return b.m.Counters().Refused > before })
	time.Sleep(100 * time.Millisecond)
	if _, ok := b.rec.isUp("a"); ok {
		t.Fatal("the replayed session came up")
	}
}

// TestPreAuthLimits: a truncated HELLO runs into the handshake deadline; a
// frame announcing more than MaxHandshakeFrame is refused at once; more than
// MaxHandshakes connections in the handshake (from four sources, none over
// MaxHandshakesPerSource) are closed unread and counted; a real peer still
// gets in after.
func TestPreAuthLimits(t *testing.T) {
	b := startNode(t, "b", "plant", secret, 2)
	sources := 0
	dial := func() net.Conn {
		sources++
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+sources%4))}}
		c, err := d.Dial("tcp", b.m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	big := dial()
	_, _ = big.Write(append([]byte("EQP2\x01"), 0x00, 0x80, 0x00, 0x00))
	_ = big.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := big.Read(make([]byte, 64)); err == nil {
		t.Fatalf("an oversized pre-auth frame was answered (%d bytes)", n)
	}
	eventually(t, "oversized frame counted", func() bool { return b.m.Counters().HandshakeFailures >= 1 })
	h := hello("plant", "x", make([]byte, nonceLen), nil)
	half := AppendFrame(nil, TypeHello, h)[:8]
	var idle []net.Conn
	for i := 0; i < b.m.cfg.MaxHandshakes+8; i++ {
		c := dial()
		_, _ = c.Write(half)
		idle = append(idle, c)
	}
	eventually(t, "extra handshakes refused", func() bool {
		c := b.m.Counters()
		return c.HandshakesBusy >= 8 && c.Handshaking == b.m.cfg.MaxHandshakes
	})
	eventually(t, "truncated handshakes time out", func() bool {
		c := b.m.Counters()
		return c.Handshaking == 0 && c.HandshakeFailures >= uint64(b.m.cfg.MaxHandshakes)
	})
	a := startNode(t, "a", "plant", secret, 1, b.m.Addr())
	eventually(t, "a real peer gets in", func() bool { _, ok := a.rec.isUp("b"); return ok })
}

func FuzzHandshakeAccept(f *testing.F) {
	d := Identity{Cluster: "plant", Node: "a", Secret: []byte(secret)}
	f.Add(AppendFrame(nil, TypeHello, hello("plant", "a", make([]byte, nonceLen), nil)))
	f.Add(append(AppendFrame(nil, TypeHello, hello("plant", "a", make([]byte, nonceLen), nil)), AppendFrame(nil, TypeAuth, appendField(nil, make([]byte, 32)))...))
	f.Add(AppendFrame(nil, TypeRefused, []byte("no")))
	f.Add([]byte("EQP2\x01\x00\x00\x10\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), &out}
		// No fuzzer input knows the listener's fresh nonce: never accepted.
		if p, err := Accept(rw, Identity{Cluster: "plant", Node: "b", Secret: []byte(secret)}); err == nil {
			t.Fatalf("accepted %+v", p)
		}
		if _, err := Dial(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), io.Discard}, d); err == nil {
			t.Fatal("dialer accepted a forged listener")
		}
	})
}

func FuzzSealedReader(f *testing.F) {
	d, l := testKeys(f)
	f.Add(bytes.Join(sealedStream(f, d, "one", "two"), nil))
	f.Add(sealedStream(f, d, "")[0])
	f.Add([]byte{0, 0, 0, 17})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := newOpener(bytes.NewReader(in), l.recv)
		if err != nil {
			t.Fatal(err)
		}
		for {
			fr, n, err := o.Read()
			if err != nil {
				return
			}
			if n > len(in) || len(fr.Body) > MaxFrame || fr.Type <= TypeRefused || fr.Type > maxType {
				t.Fatalf("frame %d %d bytes of %d", fr.Type, n, len(in))
			}
		}
	})
}

// BenchmarkSealOpen: the cost per frame of sealing and opening, for a
// heartbeat-sized, a FORWARD-sized and a FETCHED-sized body.
func BenchmarkSealOpen(b *testing.B) {
	d, l := testKeys(b)
	for _, size := range []int{16, 300, 256 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s, _ := newSealer(d.send)
			body := make([]byte, size)
			q := appendQueued(nil, TypeFetched, body)
			var stream bytes.Reader
			o, _ := newOpener(&stream, l.recv)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				q = appendQueued(q[:0], TypeFetched, body)
				if err := s.sealAll(q); err != nil {
					b.Fatal(err)
				}
				stream.Reset(q)
				if _, _, err := o.Read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
