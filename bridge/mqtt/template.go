package mqtt

import (
	"fmt"
	"strings"
)

// deviceLevel is the placeholder level of a topic template.
const deviceLevel = "{device}"

// TopicTemplate maps a topic to a device ID: MQTT levels where exactly one is
// "{device}", the others literal text, '+' (any one level) or a final '#'
// (any number of levels, zero included). It is immutable and safe for
// concurrent use.
type TopicTemplate struct {
	levels []string
	device int  // index of the {device} level
	multi  bool // last level is '#'
}

// CompileTemplate parses a topic template such as "sensors/{device}/telemetry".
func CompileTemplate(s string) (*TopicTemplate, error) {
	if err := ValidateTopicFilter(strings.ReplaceAll(s, deviceLevel, "+")); err != nil {
		return nil, fmt.Errorf("template %q: %w", s, err)
	}
	t := &TopicTemplate{levels: strings.Split(s, "/"), device: -1}
	for i, l := range t.levels {
		switch {
		case l == deviceLevel:
			if t.device >= 0 {
				return nil, fmt.Errorf("template %q: more than one %s level", s, deviceLevel)
			}
			t.device = i
		case strings.ContainsAny(l, "{}"):
			return nil, fmt.Errorf("template %q: level %q: braces only as a whole %s level", s, l, deviceLevel)
		}
	}
	if t.device < 0 {
		return nil, fmt.Errorf("template %q: no %s level", s, deviceLevel)
	}
	t.multi = t.levels[len(t.levels)-1] == "#"
	return t, nil
}

// Filter is the subscription that covers every topic the template matches.
func (t *TopicTemplate) Filter() string {
	levels := append([]string(nil), t.levels...)
	levels[t.device] = "+"
	return strings.Join(levels, "/")
}

// String returns the template as written.
func (t *TopicTemplate) String() string { return strings.Join(t.levels, "/") }

// Match returns the device level of topic, or false when the topic does not
// fit the template. The device is never empty; it is not validated here. Match
// allocates nothing.
func (t *TopicTemplate) Match(topic string) (device string, ok bool) {
	if strings.HasPrefix(topic, "$") && (t.device == 0 || t.levels[0] == "+" || t.levels[0] == "#") {
		return "", false // wildcards never match $-topics at the first level (MQTT 4.7.2)
	}
	rest, more := topic, true
	for i, want := range t.levels {
		if want == "#" {
			return device, device != "" // any number of levels, zero included
		}
		if !more {
			return "", false // the topic has fewer levels
		}
		var level string
		level, rest, more = strings.Cut(rest, "/")
		switch {
		case i == t.device:
			device = level
		case want == "+":
		case level != want:
			return "", false
		}
	}
	if more {
		return "", false // the topic has more levels
	}
	return device, device != ""
}
