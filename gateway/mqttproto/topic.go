package mqttproto

import "bytes"

var sharePrefix = []byte("$share/")

// CheckTopicName checks a topic name a client publishes to: at least one
// character, valid UTF-8 without U+0000, no wildcard. Errors wrap
// ErrTopicName.
func CheckTopicName[S ~string | ~[]byte](topic S) error {
	if len(topic) == 0 {
		return newErr(ErrTopicName, 0, "topic name", "empty")
	}
	if d := checkUTF8([]byte(topic)); d != "" {
		return newErr(ErrTopicName, 0, "topic name", d)
	}
	for i := 0; i < len(topic); i++ {
		if topic[i] == '+' || topic[i] == '#' {
			return newErr(ErrTopicName, 0, "topic name", "contains a wildcard")
		}
	}
	return nil
}

// CheckFilter checks a topic filter of a SUBSCRIBE or UNSUBSCRIBE: at least
// one character, valid UTF-8 without U+0000, '+' only as a whole level, '#'
// only as the whole last level, and for a shared subscription
// ($share/<group>/<filter>) a non-empty group without wildcards and a
// valid filter. Errors wrap ErrTopicFilter; a server refuses that one
// filter (SUBACK 0x8F, or 0x80 in 3.1.1) and keeps the others.
func CheckFilter[S ~string | ~[]byte](filter S) error {
	f := []byte(filter)
	if d := checkUTF8(f); d != "" {
		return newErr(ErrTopicFilter, 0, "topic filter", d)
	}
	if bytes.HasPrefix(f, sharePrefix) {
		group, rest, ok := ParseShared(f)
		switch {
		case !ok || len(group) == 0:
			return newErr(ErrTopicFilter, 0, "topic filter", "shared subscription without a group name or a filter")
		case bytes.ContainsAny(group, "+#"):
			return newErr(ErrTopicFilter, 0, "topic filter", "shared subscription group name with a wildcard")
		}
		f = rest
	}
	if len(f) == 0 {
		return newErr(ErrTopicFilter, 0, "topic filter", "empty")
	}
	for i, c := range f {
		switch c {
		case '+':
			if (i > 0 && f[i-1] != '/') || (i+1 < len(f) && f[i+1] != '/') {
				return newErr(ErrTopicFilter, 0, "topic filter", "'+' is not a whole level")
			}
		case '#':
			if i+1 != len(f) || (i > 0 && f[i-1] != '/') {
				return newErr(ErrTopicFilter, 0, "topic filter", "'#' is not the whole last level")
			}
		}
	}
	return nil
}

// ParseShared splits a shared subscription filter $share/<group>/<filter>.
// ok is false for any other filter (or a $share/ prefix with no second
// '/'); it checks no syntax beyond that (CheckFilter does).
func ParseShared(filter []byte) (group, rest []byte, ok bool) {
	if !bytes.HasPrefix(filter, sharePrefix) {
		return nil, nil, false
	}
	tail := filter[len(sharePrefix):]
	i := bytes.IndexByte(tail, '/')
	if i < 0 {
		return nil, nil, false
	}
	return tail[:i], tail[i+1:], true
}

// MatchTopic reports whether a valid topic filter (not a shared one)
// matches a topic name. A filter starting with a wildcard does not match
// a topic starting with '$' (MQTT section 4.7.2).
func MatchTopic[S ~string | ~[]byte](filter, topic S) bool {
	if len(topic) > 0 && topic[0] == '$' && len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	fi, ti := 0, 0
	for {
		// Both at the start of a level.
		if fi < len(filter) && filter[fi] == '#' {
			return true // "a/#" matches "a" and below; "#" matches all
		}
		fEnd := fi
		for fEnd < len(filter) && filter[fEnd] != '/' {
			fEnd++
		}
		tEnd := ti
		for tEnd < len(topic) && topic[tEnd] != '/' {
			tEnd++
		}
		if !(fEnd-fi == 1 && filter[fi] == '+') && !sameBytes(filter, fi, fEnd, topic, ti, tEnd) {
			return false
		}
		fLast, tLast := fEnd == len(filter), tEnd == len(topic)
		switch {
		case fLast && tLast:
			return true
		case tLast:
			// Topic used up: only a remaining "/#" matches (parent level).
			return len(filter)-fEnd == 2 && filter[fEnd] == '/' && filter[fEnd+1] == '#'
		case fLast:
			return false
		}
		fi, ti = fEnd+1, tEnd+1
	}
}

func sameBytes[S ~string | ~[]byte](a S, ai, aj int, b S, bi, bj int) bool {
	if aj-ai != bj-bi {
		return false
	}
	for ; ai < aj; ai, bi = ai+1, bi+1 {
		if a[ai] != b[bi] {
			return false
		}
	}
	return true
}
