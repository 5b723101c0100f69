package natsproto

import "fmt"

// Parser frames the byte stream a NATS client sends into ops. It is a pure
// state machine for one connection: no I/O, not safe for concurrent use.
//
// Use it as a read loop does:
//
//	for {
//		n, err := conn.Read(buf)
//		...
//		if err := p.Feed(buf[:n]); err != nil { ... }
//		for {
//			op, ok, err := p.Next()
//			if err != nil { send -ERR (see ClientError), close }
//			if !ok { break } // buffer consumed, read more
//			handle(op)
//		}
//	}
//
// Arguments and payloads are sliced out of the fed buffer without copying.
// A frame cut across reads, at any byte, is copied into scratch as it
// arrives; scratch is bounded by Limits (a control line plus a payload).
//
// Errors: every error from Next is fatal for the stream, because after a
// framing error nothing says where the next op starts. The parser then
// stays failed: Next and Feed return the same error until Reset. Ops
// returned before the error remain valid until the next Feed or Reset.
type Parser struct {
	lim Limits

	in  []byte // buffer from the last Feed
	pos int    // first byte of in not yet parsed

	// Split frames live in one of two scratch buffers. The op completed from
	// scratch after a Feed points into it, and the tail of the same buffer is
	// saved into the other one, so that op stays valid until the next Feed.
	scratch [2][]byte
	pending int // scratch index holding an incomplete frame, or -1
	lent    int // scratch index an op of this Feed points into, or -1
	need    int // full length of the pending frame once known, else 0

	err error // sticky error
}

// NewParser returns a parser enforcing lim.
func NewParser(lim Limits) (*Parser, error) {
	if err := lim.Validate(); err != nil {
		return nil, fmt.Errorf("natsproto: new parser: %w", err)
	}
	return &Parser{lim: lim, pending: -1, lent: -1}, nil
}

// Feed hands the parser the next bytes read from the connection. Call it only
// once Next has reported that it needs more input (ok false). Ops returned
// before stop being valid now; buf must stay unchanged until the next Feed.
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

// Next returns the next complete op. ok is false, with a nil error, when the
// fed buffer is used up; any incomplete frame at its end has been kept, and
// the parser waits for Feed. A non-nil error is sticky (see Parser).
func (p *Parser) Next() (op Op, ok bool, err error) {
	if p.err != nil {
		return Op{}, false, p.err
	}
	if p.pending >= 0 {
		op, ok, err = p.continueSplit()
	} else {
		op, ok, err = p.parseInput()
	}
	if err != nil {
		p.err = err
		return Op{}, false, err
	}
	return op, ok, nil
}

// Reset forgets all input, any pending frame and a sticky error, keeping
// limits and retained scratch, so the parser can serve a new connection.
func (p *Parser) Reset() {
	p.in, p.pos = nil, 0
	p.pending, p.lent, p.need = -1, -1, 0
	p.err = nil
	p.releaseIdleScratch()
}

// Pending returns how many bytes of an incomplete frame the parser holds.
func (p *Parser) Pending() int {
	if p.pending < 0 {
		return 0
	}
	return len(p.scratch[p.pending])
}

// parseInput parses the next frame straight from the fed buffer.
func (p *Parser) parseInput() (Op, bool, error) {
	rest := p.in[p.pos:]
	if len(rest) == 0 {
		return Op{}, false, nil
	}
	op, n, need, err := parseFrame(rest, &p.lim)
	if err != nil {
		return Op{}, false, err
	}
	if n > 0 {
		p.pos += n
		return op, true, nil
	}
	p.savePartial(rest, need)
	p.pos = len(p.in)
	return Op{}, false, nil
}
