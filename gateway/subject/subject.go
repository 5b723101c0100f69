// Package subject is the subject grammar shared by edgeq's front ends and
// its queue groups: dot-separated tokens, the wildcard tokens '*' (one
// token) and '>' (the rest) in subscription filters, and matching a subject
// against a filter. It knows no protocol: natsproto frames NATS with it,
// gateway/groups decides which telemetry subjects a group's filter takes
// with it, and config checks NATS permissions with it.
package subject

import "errors"

// Errors of CheckPublish and CheckFilter. Front ends map them to their own
// wire errors (natsproto's -ERR 'Invalid Subject').
var (
	// ErrInvalidFilter: not a valid subscription filter.
	ErrInvalidFilter = errors.New("subject: invalid filter")
	// ErrInvalidPublish: a subject to publish to that is empty, malformed
	// or has wildcard tokens.
	ErrInvalidPublish = errors.New("subject: invalid publish subject")
)

// Text is a subject held as a string or as bytes; the subject functions take
// either without converting, so they never allocate.
type Text interface{ ~string | ~[]byte }

// Wildcard tokens of a subscription filter.
const (
	tokenAny  = '*' // exactly one token
	tokenRest = '>' // one or more tokens, last in a filter
)

// subjectByteOK reports whether c may appear in a subject token: no spaces,
// no ASCII control bytes (they would break the framing of MSG lines), no
// token separator. Other bytes, UTF-8 included, are allowed as in NATS.
func subjectByteOK(c byte) bool { return c > ' ' && c != 0x7f && c != '.' }

// validSubject checks tokens separated by '.', none empty, all bytes
// allowed. With wildcards, '*' and '>' are allowed as whole tokens and '>'
// only last; without, they are allowed only inside a longer token
// ("a*b" is a literal, as in nats-server).
func validSubject[T Text](s T, wildcards bool) bool {
	if len(s) == 0 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if !subjectByteOK(s[i]) {
				return false
			}
			continue
		}
		// s[start:i] is a token.
		switch n := i - start; {
		case n == 0:
			return false
		case n == 1 && (s[start] == tokenAny || s[start] == tokenRest):
			if !wildcards || (s[start] == tokenRest && i != len(s)) {
				return false
			}
		}
		start = i + 1
	}
	return true
}

// ValidPublish reports whether s may be published to: a literal
// subject with no wildcard tokens.
func ValidPublish[T Text](s T) bool { return validSubject(s, false) }

// ValidFilter reports whether s may be subscribed to: a subject whose tokens
// may be '*', and whose last token may be '>'.
func ValidFilter[T Text](s T) bool { return validSubject(s, true) }

// CheckPublish returns ErrInvalidPublish unless ValidPublish(s).
func CheckPublish[T Text](s T) error {
	if !ValidPublish(s) {
		return ErrInvalidPublish
	}
	return nil
}

// CheckFilter returns ErrInvalidFilter unless ValidFilter(s).
func CheckFilter[T Text](s T) error {
	if !ValidFilter(s) {
		return ErrInvalidFilter
	}
	return nil
}

// Match reports whether subject is delivered to a subscription on
// filter: token by token, '*' in the filter matches any one token and a
// final '>' matches one or more. Other tokens match byte for byte, so a
// literal filter matches only itself. Empty tokens never match, so an
// invalid subject or filter matches nothing; validate both on entry anyway,
// as bytes are not checked here.
func Match[F, S Text](filter F, subject S) bool {
	fi, si := 0, 0
	for {
		fEnd := tokenEnd(filter, fi)
		sEnd := tokenEnd(subject, si)
		if fEnd == fi || sEnd == si {
			return false // empty token, or subject ran out
		}
		if fEnd-fi == 1 && filter[fi] == tokenRest {
			return fEnd == len(filter) && noEmptyToken(subject, sEnd)
		}
		if !(fEnd-fi == 1 && filter[fi] == tokenAny) && !tokenEqual(filter, fi, fEnd, subject, si, sEnd) {
			return false
		}
		fDone, sDone := fEnd == len(filter), sEnd == len(subject)
		if fDone || sDone {
			return fDone && sDone
		}
		fi, si = fEnd+1, sEnd+1
	}
}

// tokenEnd returns the index of the '.' ending the token that starts at i,
// or len(s). At or past the end it returns i, an empty token.
func tokenEnd[T Text](s T, i int) int {
	if i >= len(s) {
		return i
	}
	for j := i; j < len(s); j++ {
		if s[j] == '.' {
			return j
		}
	}
	return len(s)
}

// noEmptyToken reports whether s[from:], which starts at a '.' or at the
// end, holds only non-empty tokens.
func noEmptyToken[T Text](s T, from int) bool {
	for j := from; j < len(s); j++ {
		if s[j] == '.' && (j+1 == len(s) || s[j+1] == '.') {
			return false
		}
	}
	return true
}

// tokenEqual compares a[ai:aEnd] with b[bi:bEnd] byte for byte.
func tokenEqual[A, B Text](a A, ai, aEnd int, b B, bi, bEnd int) bool {
	if aEnd-ai != bEnd-bi {
		return false
	}
	for k := 0; k < aEnd-ai; k++ {
		if a[ai+k] != b[bi+k] {
			return false
		}
	}
	return true
}
