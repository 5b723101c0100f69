package mqttproto

import "fmt"

// Parser frames the byte stream of one MQTT connection into packets. It is
// a pure state machine: no I/O, not safe for concurrent use.
//
// Use it as a read loop does:
//
//	for {
//		n, err := conn.Read(buf)
//		...
//		if err := p.Feed(buf[:n]); err != nil { ... }
//		for {
//			pkt, ok, err := p.Next()
//			if err != nil { refuse (ReasonCodeOf, ConnackCode311), close }
//			if !ok { break } // buffer consumed, read more
//			handle(pkt)
//		}
//	}
//
// Fields are sliced out of the fed buffer without copying. A packet cut
// across reads, at any byte, is copied into scratch as it arrives; scratch
// grows with the bytes received (not to the size a header announces) and
// is bounded by Limits.MaxPacketSize.
//
// The first packet on a ServerSide parser must be CONNECT; its protocol
// level decides how the rest decodes (Version). Errors from Next are fatal
// for the stream: the parser then stays failed, and Next and Feed return
// the same error until Reset. Packets returned before the error remain
// valid until the next Feed or Reset.
type Parser struct {
	lim Limits
	st  streamState

	in  []byte // buffer from the last Feed
	pos int    // first byte of in not yet parsed

	// Split packets live in one of two scratch buffers. The packet completed
	// from scratch after a Feed points into it, and the tail of the same
	// buffer is saved into the other one, so that packet stays valid until
	// the next Feed.
	scratch [2][]byte
	pending int // scratch index holding an incomplete packet, or -1
	lent    int // scratch index a packet of this Feed points into, or -1
	need    int // full length of the pending packet once known, else 0

	err error // sticky error
}

// NewParser returns a parser for one side of a connection, enforcing lim.
func NewParser(lim Limits, side Side) (*Parser, error) {
	if err := lim.Validate(); err != nil {
		return nil, fmt.Errorf("mqttproto: new parser: %w", err)
	}
	return &Parser{lim: lim, st: streamState{side: side}, pending: -1, lent: -1}, nil
}

// SetVersion sets the protocol version of a ClientSide parser (the one its
// CONNECT asked for). On a ServerSide parser the CONNECT sets it.
func (p *Parser) SetVersion(v Version) { p.st.version = v }

// Version returns the stream's protocol version: that of the CONNECT, as
// soon as its protocol level was read (even when the CONNECT was then
// refused, so the refusal can be sent in the client's version), else 0.
func (p *Parser) Version() Version { return p.st.version }

// Feed hands the parser the next bytes read from the connection. Call it
// only once Next has reported that it needs more input (ok false). Packets
// returned before stop being valid now; buf must stay unchanged until the
// next Feed.
func (p *Parser) Feed(buf []byte) error {
	if p.err != nil {
		return p.err
	}
	if p.pos < len(p.in) {
		return ErrUnreadInput
	}
	p.in, p.pos, p.lent = buf, 0, -1
	p.releaseIdleScratch()
	return nil
}

// Next returns the next complete packet. ok is false, with a nil error,
// when the fed buffer is used up; any incomplete packet at its end has been
// kept, and the parser waits for Feed. A non-nil error is sticky.
func (p *Parser) Next() (pkt Packet, ok bool, err error) {
	if p.err != nil {
		return Packet{}, false, p.err
	}
	if p.pending >= 0 {
		ok, err = p.continueSplit(&pkt)
	} else {
		ok, err = p.parseInput(&pkt)
	}
	if err != nil {
		p.err = err
		return Packet{}, false, err
	}
	return pkt, ok, nil
}

// Reset forgets all input, any pending packet, a sticky error and the
// stream's version, keeping limits, side and retained scratch, so the
// parser can serve a new connection.
func (p *Parser) Reset() {
	p.in, p.pos = nil, 0
	p.pending, p.lent, p.need = -1, -1, 0
	p.err = nil
	p.st = streamState{side: p.st.side}
	p.releaseIdleScratch()
}

// Pending returns how many bytes of an incomplete packet the parser holds.
func (p *Parser) Pending() int {
	if p.pending < 0 {
		return 0
	}
	return len(p.scratch[p.pending])
}

// parseInput parses the next packet straight from the fed buffer.
func (p *Parser) parseInput(pkt *Packet) (bool, error) {
	rest := p.in[p.pos:]
	if len(rest) == 0 {
		return false, nil
	}
	h, complete, err := parseHeader(rest, &p.st, &p.lim)
	if err != nil {
		return false, err
	}
	if complete && len(rest) >= h.total {
		if err := decode(pkt, h, rest[h.hlen:h.total:h.total], &p.st); err != nil {
			return false, err
		}
		p.pos += h.total
		return true, nil
	}
	need := 0
	if complete {
		need = h.total
	}
	p.savePartial(rest, need)
	p.pos = len(p.in)
	return false, nil
}

// maxHeader is the longest fixed header: a type byte and 4 length bytes.
const maxHeader = 5

// savePartial copies the incomplete packet at the end of the fed buffer
// into the scratch buffer no packet of this Feed points into. need is the
// packet's full length when its header is complete, else 0.
func (p *Parser) savePartial(partial []byte, need int) {
	idx := 0
	if p.lent == 0 {
		idx = 1
	}
	s := grow(p.scratch[idx][:0], len(partial), max(need, maxHeader))
	p.scratch[idx] = append(s, partial...)
	p.pending, p.need = idx, need
}

// grow returns b with room for n more bytes, at most limit in all. It
// doubles rather than allocating the announced packet size at once, so a
// 5-byte header announcing a large packet costs memory only as the bytes
// arrive.
func grow(b []byte, n, limit int) []byte {
	if len(b)+n <= cap(b) {
		return b
	}
	c := min(limit, max(2*cap(b), len(b)+n, 256))
	g := make([]byte, len(b), c)
	copy(g, b)
	return g
}

// continueSplit appends bytes from the fed buffer to the pending packet
// until it is complete or the buffer is used up, taking only the bytes the
// packet needs.
func (p *Parser) continueSplit(pkt *Packet) (bool, error) {
	for {
		frame := p.scratch[p.pending]
		avail := p.in[p.pos:]
		if p.need == 0 {
			// Header incomplete: take one byte at a time up to its end.
			take := min(len(avail), maxHeader-len(frame))
			frame = append(grow(frame, take, maxHeader), avail[:take]...)
			h, complete, err := parseHeader(frame, &p.st, &p.lim)
			if err != nil {
				return false, err
			}
			if !complete {
				p.pos += take
				p.scratch[p.pending] = frame
				return false, nil
			}
			// Keep only the header bytes; the body is taken below.
			used := h.hlen - (len(frame) - take)
			p.pos += used
			frame = frame[:h.hlen]
			p.need = h.total
			p.scratch[p.pending] = frame
			continue
		}
		take := min(len(avail), p.need-len(frame))
		frame = append(grow(frame, take, p.need), avail[:take]...)
		p.pos += take
		p.scratch[p.pending] = frame
		if len(frame) < p.need {
			return false, nil
		}
		h, _, err := parseHeader(frame, &p.st, &p.lim)
		if err != nil {
			return false, err
		}
		if err := decode(pkt, h, frame[h.hlen:h.total:h.total], &p.st); err != nil {
			return false, err
		}
		p.lent, p.pending, p.need = p.pending, -1, 0
		return true, nil
	}
}

// releaseIdleScratch drops scratch grown beyond ScratchRetain that holds
// no pending packet and no packet still in use, so a large packet does not
// pin its memory for the life of the connection.
func (p *Parser) releaseIdleScratch() {
	for i := range p.scratch {
		if i != p.pending && i != p.lent && cap(p.scratch[i]) > p.lim.ScratchRetain {
			p.scratch[i] = nil
		}
	}
}
