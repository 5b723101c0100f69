package mqtt

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// rawPublisher is a minimal MQTT 3.1.1 QoS 1 publisher written on paho's
// packet codec, so that the tests know exactly which messages the broker
// PUBACKed: paho's client may complete a publish token on reconnect without a
// real PUBACK (GOTCHAS 4.4). It keeps a persistent session and, after every
// reconnect, resends each message without a PUBACK (DUP set) before new ones.
type rawPublisher struct {
	addr     string
	clientID string
	window   int // messages in flight at most
	msgs     []pubMsg

	mu       sync.Mutex
	next     int             // first message never sent
	inflight map[uint16]int  // packet ID → message index
	order    []uint16        // packet IDs in send order, for resends
	ackConn  []int           // per message: connection that got its PUBACK (0: none)
	acked    int             // messages with a PUBACK
	conns    int             // connections made so far
	lastID   uint16          // last packet ID used
	progress chan struct{}   // closed and replaced on every PUBACK
	ids      map[uint16]bool // packet IDs in use

	held atomic.Bool // while set, no new connection is made
}

type pubMsg struct {
	topic   string
	payload []byte
}

func newRawPublisher(addr, clientID string, window int, msgs []pubMsg) *rawPublisher {
	return &rawPublisher{
		addr: addr, clientID: clientID, window: window, msgs: msgs,
		inflight: make(map[uint16]int), ackConn: make([]int, len(msgs)),
		progress: make(chan struct{}), ids: make(map[uint16]bool),
	}
}

// run publishes every message and returns once each has a PUBACK, or when
// ctx ends. Connection errors are retried every 50ms (the broker may be
// restarting).
func (p *rawPublisher) run(ctx context.Context) error {
	for {
		if p.ackedCount() == len(p.msgs) {
			return nil
		}
		if p.held.Load() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		err := p.session(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("publisher: %d of %d acked: %w (last: %v)", p.ackedCount(), len(p.msgs), ctx.Err(), err)
		}
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *rawPublisher) session(ctx context.Context) error {
	conn, err := net.DialTimeout("tcp", p.addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := p.connect(conn); err != nil {
		return err
	}
	p.mu.Lock()
	p.conns++
	connNo := p.conns
	p.mu.Unlock()

	acks := make(chan uint16, p.window)
	readErr := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			pkt, err := packets.ReadPacket(conn)
			if err != nil {
				readErr <- err
				return
			}
			if pa, ok := pkt.(*packets.PubackPacket); ok {
				select {
				case acks <- pa.MessageID:
				case <-quit:
					return
				}
			}
		}
	}()
	// Resend, in their first send order, what has no PUBACK.
	p.mu.Lock()
	resend := append([]uint16(nil), p.order...)
	p.mu.Unlock()
	for _, id := range resend {
		p.mu.Lock()
		i, ok := p.inflight[id]
		p.mu.Unlock()
		if ok {
			if err := p.write(conn, id, i, true); err != nil {
				return err
			}
		}
	}
	for {
		for {
			p.mu.Lock()
			if p.next >= len(p.msgs) || len(p.inflight) >= p.window {
				p.mu.Unlock()
				break
			}
			i := p.next
			p.next++
			id := p.newID()
			p.inflight[id] = i
			p.order = append(p.order, id)
			p.mu.Unlock()
			if err := p.write(conn, id, i, false); err != nil {
				return err
			}
		}
		if p.ackedCount() == len(p.msgs) {
			return nil
		}
		select {
		case id := <-acks:
			p.onAck(id, connNo)
		case err := <-readErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *rawPublisher) connect(conn net.Conn) error {
	c := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	c.ProtocolName, c.ProtocolVersion = "MQTT", 4
	c.CleanSession = false
	c.ClientIdentifier = p.clientID
	c.Keepalive = 0 // no pings needed: the test ends the connection
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if err := c.Write(conn); err != nil {
		return err
	}
	pkt, err := packets.ReadPacket(conn)
	if err != nil {
		return err
	}
	ca, ok := pkt.(*packets.ConnackPacket)
	if !ok || ca.ReturnCode != packets.Accepted {
		return fmt.Errorf("connect refused: %v", pkt)
	}
	return nil
}

func (p *rawPublisher) write(conn net.Conn, id uint16, i int, dup bool) error {
	pub := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	pub.Qos, pub.Dup = 1, dup
	pub.TopicName = p.msgs[i].topic
	pub.Payload = p.msgs[i].payload
	pub.MessageID = id
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return pub.Write(conn)
}

// newID returns a free packet ID; p.mu is held.
func (p *rawPublisher) newID() uint16 {
	for {
		p.lastID++
		if p.lastID != 0 && !p.ids[p.lastID] {
			p.ids[p.lastID] = true
			return p.lastID
		}
	}
}

func (p *rawPublisher) onAck(id uint16, connNo int) {
	p.mu.Lock()
	i, ok := p.inflight[id]
	if !ok {
		p.mu.Unlock()
		return
	}
	delete(p.inflight, id)
	delete(p.ids, id)
	for k, v := range p.order {
		if v == id {
			p.order = append(p.order[:k], p.order[k+1:]...)
			break
		}
	}
	p.ackConn[i] = connNo
	p.acked++
	close(p.progress)
	p.progress = make(chan struct{})
	p.mu.Unlock()
}

func (p *rawPublisher) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// connections is the number of connections made so far.
func (p *rawPublisher) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// ackedBy returns the indexes of the messages whose PUBACK came on a
// connection numbered above after (after = 0: all acked messages).
func (p *rawPublisher) ackedBy(after int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for i, c := range p.ackConn {
		if c > after {
			out = append(out, i)
		}
	}
	return out
}

// waitAcked waits until at least n messages have a PUBACK.
func (p *rawPublisher) waitAcked(ctx context.Context, n int) error {
	for {
		p.mu.Lock()
		acked, ch := p.acked, p.progress
		p.mu.Unlock()
		if acked >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d PUBACKs, have %d: %w", n, acked, ctx.Err())
		}
	}
}
