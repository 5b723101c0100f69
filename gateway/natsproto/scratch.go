package natsproto

import "bytes"

// lineScratch is the capacity a split control line needs at most.
func (p *Parser) lineScratch() int { return p.lim.MaxControlLine + 2 }

// savePartial copies the incomplete frame at the end of the fed buffer into
// the scratch buffer no op of this Feed points into. need is the frame's
// full length when its control line is complete, else 0.
func (p *Parser) savePartial(partial []byte, need int) {
	idx := 0
	if p.lent == 0 {
		idx = 1
	}
	capacity := need
	if capacity == 0 {
		capacity = p.lineScratch()
	}
	s := p.scratch[idx]
	if cap(s) < capacity {
		s = make([]byte, 0, capacity)
	}
	p.scratch[idx] = append(s[:0], partial...)
	p.pending, p.need = idx, need
}

// continueSplit appends bytes from the fed buffer to the pending frame until
// it is complete or the buffer is used up. Only the bytes the frame needs
// are taken: up to the line's LF while the line is incomplete, then exactly
// the rest of the payload.
func (p *Parser) continueSplit() (Op, bool, error) {
	for {
		frame := p.scratch[p.pending]
		avail := p.in[p.pos:]
		if p.need == 0 {
			// Never take more than the longest line could still use; the
			// line check below then rejects an overlong one.
			take := min(len(avail), p.lineScratch()-len(frame))
			lf := bytes.IndexByte(avail[:take], '\n')
			if lf >= 0 {
				take = lf + 1
			}
			prev := len(frame)
			frame = append(frame, avail[:take]...)
			p.pos += take
			p.scratch[p.pending] = frame
			if lf < 0 && prev > longestVerb+1 {
				// The verb was settled by an earlier check of more than
				// longestVerb bytes; only the length can fail now. This keeps
				// a line trickled in byte by byte linear, not quadratic.
				if len(trimCR(frame)) > p.lim.MaxControlLine {
					return Op{}, false, opError(ErrControlLineTooLong, frame)
				}
				return Op{}, false, nil
			}
		} else {
			take := min(len(avail), p.need-len(frame))
			frame = append(frame, avail[:take]...)
			p.pos += take
		}
		p.scratch[p.pending] = frame
		if p.need > 0 && len(frame) < p.need {
			// Payload still incomplete; no need to parse the line again.
			return Op{}, false, nil
		}

		op, n, need, err := parseFrame(frame, &p.lim)
		switch {
		case err != nil:
			return Op{}, false, err
		case n > 0:
			// The frame ends exactly at the end of scratch: only needed bytes were taken.
			p.lent, p.pending, p.need = p.pending, -1, 0
			return op, true, nil
		case need > 0 && p.need == 0:
			// Line complete: make room for the whole frame, once.
			p.need = need
			if cap(frame) < need {
				grown := make([]byte, len(frame), need)
				copy(grown, frame)
				p.scratch[p.pending] = grown
			}
		}
		if p.pos == len(p.in) {
			return Op{}, false, nil
		}
	}
}

// releaseIdleScratch drops scratch grown beyond ScratchRetain that holds
// no pending frame and no op still in use, so a large message does not pin
// its memory for the life of the connection.
func (p *Parser) releaseIdleScratch() {
	for i := range p.scratch {
		if i != p.pending && i != p.lent && cap(p.scratch[i]) > p.lim.ScratchRetain {
			p.scratch[i] = nil
		}
	}
}
