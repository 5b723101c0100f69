package serial

import "bytes"

// Framer cuts a byte stream into newline-delimited frames. It is pure: no I/O,
// no clock. A trailing '\r' is stripped ("\r\n" is tolerated); empty lines
// are skipped. A frame longer than max is reported once as DropOversize, as
// soon as it is known to be too long, and the stream is discarded up to the
// next newline: an oversize frame is never split into pieces.
//
// Its memory is bounded: one buffer of max+1 bytes holds a frame cut by a
// read boundary.
type Framer struct {
	max      int
	buf      []byte // the start of a frame whose newline has not arrived
	skipping bool   // inside an oversize frame: discard up to the next '\n'
}

// NewFramer returns a framer for frames of at most limit bytes (terminator
// excluded); limit < 1 is taken as 1.
func NewFramer(limit int) *Framer {
	limit = max(limit, 1)
	// limit+1: the frame plus a '\r' whose '\n' has not arrived yet.
	return &Framer{max: limit, buf: make([]byte, 0, limit+1)}
}

// Feed cuts p into frames. For each complete frame it calls on(frame,
// dropNone); frame aliases p or the framer's buffer and is valid only during
// the call. For each oversize frame it calls on(nil, DropOversize) once.
func (f *Framer) Feed(p []byte, on func(frame []byte, drop DropReason)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.keepPartial(p, on)
			return
		}
		line := p[:i]
		p = p[i+1:]
		if f.skipping {
			f.skipping = false // the oversize frame ends here
			continue
		}
		if len(f.buf) > 0 {
			if len(f.buf)+len(line) > f.max+1 {
				f.buf = f.buf[:0]
				on(nil, DropOversize)
				continue
			}
			line = append(f.buf, line...)
			f.buf = f.buf[:0] // line keeps the bytes until the next append
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case len(line) > f.max:
			on(nil, DropOversize)
		case len(line) > 0:
			on(line, dropNone)
		}
	}
}

// keepPartial buffers the start of a frame, or starts skipping when it can
// no longer fit: max bytes plus a '\r' is the most a frame can hold before
// its '\n'.
func (f *Framer) keepPartial(p []byte, on func([]byte, DropReason)) {
	if f.skipping {
		return
	}
	if len(f.buf)+len(p) > f.max+1 {
		f.buf = f.buf[:0]
		f.skipping = true
		on(nil, DropOversize)
		return
	}
	f.buf = append(f.buf, p...)
}

// Reset forgets any partial frame, as after the port closed. It reports
// whether a partial frame (not an already counted oversize one) was lost.
func (f *Framer) Reset() (lostPartial bool) {
	lostPartial = len(f.buf) > 0
	f.buf = f.buf[:0]
	f.skipping = false
	return lostPartial
}
