package natsproto

// verbs are the operations a client may send; matched case-insensitively.
var verbs = [...]struct {
	name string
	kind OpKind
}{
	{"CONNECT", OpConnect},
	{"HPUB", OpHPub},
	{"PING", OpPing},
	{"PONG", OpPong},
	{"PUB", OpPub},
	{"SUB", OpSub},
	{"UNSUB", OpUnsub},
}

// longestVerb bounds how many bytes decide whether a line starts with a verb.
const longestVerb = len("CONNECT")

// isSeparator reports whether c separates the fields of a control line.
func isSeparator(c byte) bool { return c == ' ' || c == '\t' }

// foldEqual compares b to an upper-case ASCII verb. Clearing bit 5 maps a
// lower-case letter to upper case; for the letters verbs are made of, only
// the two cases of that letter map onto it.
func foldEqual(b []byte, verb string) bool {
	if len(b) != len(verb) {
		return false
	}
	for i := range len(b) {
		if b[i]&^0x20 != verb[i] {
			return false
		}
	}
	return true
}

// lookupVerb returns the op named by tok, or 0.
func lookupVerb(tok []byte) OpKind {
	for _, v := range verbs {
		if foldEqual(tok, v.name) {
			return v.kind
		}
	}
	return 0
}

// isVerbPrefix reports whether tok could still grow into a verb.
func isVerbPrefix(tok []byte) bool {
	if len(tok) > longestVerb {
		return false
	}
	for _, v := range verbs {
		if len(tok) <= len(v.name) && foldEqual(tok, v.name[:len(tok)]) {
			return true
		}
	}
	return false
}

// splitVerb cuts the first field off a control line: the verb token and the
// rest after it. ended is false when the token runs to the end of line.
func splitVerb(line []byte) (tok, rest []byte, ended bool) {
	for i, c := range line {
		if isSeparator(c) {
			return line[:i], line[i:], true
		}
	}
	return line, nil, false
}

// checkVerb classifies the start of a control line. In a partial line
// (complete false) a token that reaches the end may still be growing, so it
// only has to be a prefix of a verb. The answer for a prefix of a line never
// contradicts the answer for the whole line, which keeps split and unsplit
// parses in agreement.
func checkVerb(line []byte, complete bool) (OpKind, error) {
	tok, _, ended := splitVerb(line)
	if ended || complete {
		if k := lookupVerb(tok); k != 0 {
			return k, nil
		}
		return 0, opError(ErrUnknownOp, line)
	}
	if !isVerbPrefix(tok) {
		return 0, opError(ErrUnknownOp, line)
	}
	return 0, nil
}
