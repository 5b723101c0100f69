package mqtt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxTopicLen is MQTT's UTF-8 string limit.
const maxTopicLen = 65535

// ValidateTopicFilter checks an MQTT topic filter: non-empty UTF-8 without NUL,
// '+' only as a whole level, '#' only as the whole last level.
func ValidateTopicFilter(f string) error {
	if f == "" {
		return errors.New("empty topic filter")
	}
	if len(f) > maxTopicLen {
		return fmt.Errorf("topic filter of %d bytes, at most %d", len(f), maxTopicLen)
	}
	if !utf8.ValidString(f) || strings.IndexByte(f, 0) >= 0 {
		return fmt.Errorf("topic filter %q: not UTF-8 or contains NUL", f)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("topic filter %q: '#' must be the last level", f)
		case l != "#" && l != "+" && strings.ContainsAny(l, "#+"):
			return fmt.Errorf("topic filter %q: level %q mixes a wildcard with text", f, l)
		}
	}
	return nil
}
