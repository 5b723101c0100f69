package natsproto

import "bytes"

// parseFrame parses the frame at the start of b: a control line and, for PUB
// and HPUB, the payload with its CRLF. It returns one of
//
//	n > 0:            b starts with a complete frame of n bytes, described by op;
//	n == 0, need > 0: the control line is complete, the frame is need bytes long;
//	n == 0, need == 0: the control line is not complete yet;
//	err != nil:       b cannot start a valid frame, whatever follows.
//
// Errors depend only on the bytes seen, and once a prefix is rejected every
// longer input is rejected the same way; that is what makes a parse cut at
// any byte equal to an uncut one.
func parseFrame(b []byte, lim *Limits) (op Op, n, need int, err error) {
	// A line longer than the limit is known as soon as MaxControlLine+2
	// bytes show no LF, so never search further.
	window := b
	if len(window) > lim.MaxControlLine+2 {
		window = window[:lim.MaxControlLine+2]
	}
	lf := bytes.IndexByte(window, '\n')
	if lf < 0 {
		return Op{}, 0, 0, checkPartialLine(window, lim)
	}
	op, hdr, size, err := parseControlLine(trimCR(b[:lf]), lim)
	if err != nil {
		return Op{}, 0, 0, err
	}
	start := lf + 1
	if op.Kind != OpPub && op.Kind != OpHPub {
		return op, start, 0, nil
	}
	end := start + size
	if len(b) < end+2 {
		return Op{}, 0, end + 2, nil
	}
	if b[end] != '\r' || b[end+1] != '\n' {
		return Op{}, 0, 0, opError(ErrPayloadTerminator, b[:lf])
	}
	if op.Kind == OpHPub && hdr > 0 {
		// A header block of length 0 (nats.js's js.publish without options
		// sends "HPUB subj reply 0 N") is no headers, as in nats-server:
		// Header stays nil.
		split := start + hdr
		op.Header = b[start:split:split]
		start = split
	}
	op.Payload = b[start:end:end]
	return op, end + 2, 0, nil
}

// trimCR drops one CR before the LF; a bare LF ends a line too, as in nats-server.
func trimCR(line []byte) []byte {
	if len(line) > 0 && line[len(line)-1] == '\r' {
		return line[:len(line)-1]
	}
	return line
}

// checkPartialLine rejects an unterminated control line early: an unknown
// verb, or more bytes than a line may hold. A final CR may be the first half
// of the line ending, so it does not count yet.
func checkPartialLine(b []byte, lim *Limits) error {
	line := trimCR(b)
	if _, err := checkVerb(line, false); err != nil {
		return err
	}
	if len(line) > lim.MaxControlLine {
		return opError(ErrControlLineTooLong, line)
	}
	return nil
}

// parseControlLine parses a complete control line without its line ending.
// For PUB and HPUB it returns the header size and the total payload size.
func parseControlLine(line []byte, lim *Limits) (op Op, hdr, size int, err error) {
	kind, err := checkVerb(line, true)
	if err != nil {
		return Op{}, 0, 0, err
	}
	if len(line) > lim.MaxControlLine {
		return Op{}, 0, 0, opError(ErrControlLineTooLong, line)
	}
	_, rest, _ := splitVerb(line)
	op.Kind = kind
	var args [maxArgs][]byte
	n := splitArgs(rest, &args)
	bad := func() (Op, int, int, error) { return Op{}, 0, 0, opError(ErrBadArgs, line) }

	switch kind {
	case OpPing, OpPong:
		if n != 0 {
			return bad()
		}
	case OpConnect:
		js := trimSeparators(rest)
		if len(js) == 0 {
			return bad()
		}
		op.Connect = js[:len(js):len(js)]
	case OpSub:
		if n != 2 && n != 3 {
			return bad()
		}
		op.Subject, op.SID = args[0], args[n-1]
		if n == 3 {
			op.Queue = args[1]
		}
	case OpUnsub:
		if n != 1 && n != 2 {
			return bad()
		}
		op.SID = args[0]
		if n == 2 {
			max, ok := parseCount(args[1])
			if !ok {
				return bad()
			}
			op.Max = max
		}
	case OpPub:
		if n != 2 && n != 3 {
			return bad()
		}
		total, ok := parseCount(args[n-1])
		if !ok {
			return bad()
		}
		if total > int64(lim.MaxPayload) {
			return Op{}, 0, 0, opError(ErrPayloadTooBig, line)
		}
		op.Subject, size = args[0], int(total)
		if n == 3 {
			op.Reply = args[1]
		}
	case OpHPub:
		if n != 3 && n != 4 {
			return bad()
		}
		h, okH := parseCount(args[n-2])
		total, okT := parseCount(args[n-1])
		if !okH || !okT || h > total {
			return bad()
		}
		if total > int64(lim.MaxPayload) {
			return Op{}, 0, 0, opError(ErrPayloadTooBig, line)
		}
		op.Subject, hdr, size = args[0], int(h), int(total)
		if n == 4 {
			op.Reply = args[1]
		}
	}
	return op, hdr, size, nil
}
