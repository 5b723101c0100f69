package mqttproto

import (
	"strings"
	"testing"
)

func TestCheckFilter(t *testing.T) {
	for _, tc := range []struct {
		f      string
		detail string // "" for valid
	}{
		{"a", ""}, {"#", ""}, {"+", ""}, {"a/#", ""}, {"a/+/b", ""}, {"+/+", ""}, {"/", ""}, {"a//b", ""}, {"/#", ""},
		{"$SYS/#", ""}, {"$share/g/a/#", ""}, {"$share/g/#", ""}, {"$share/g//", ""}, {"$share/workers/telemetry/+/data", ""},
		{"$share", ""}, // a plain filter: "$share" without the slash is no shared subscription
		{"", "empty"},
		{"a/#/b", "'#' is not the whole last level"}, {"a#", "'#' is not the whole last level"}, {"#/", "'#' is not"},
		{"a+", "'+' is not a whole level"}, {"+a", "'+' is not a whole level"}, {"a/b+/c", "'+'"},
		{"$share/", "without a group name or a filter"}, {"$share/g", "without a group name or a filter"},
		{"$share//a", "without a group name"}, {"$share/g/", "empty"}, {"$share/g+/a", "group name with a wildcard"},
		{"$share/#/a", "group name with a wildcard"}, {"$share/g/a#", "'#'"},
		{"a\x00", "U+0000"}, {"\xff", "invalid UTF-8"},
	} {
		err := CheckFilter(tc.f)
		switch {
		case tc.detail == "" && err != nil:
			t.Errorf("CheckFilter(%q): %v", tc.f, err)
		case tc.detail != "" && (err == nil || sentinelOf(err) != ErrTopicFilter || !strings.Contains(err.Error(), tc.detail)):
			t.Errorf("CheckFilter(%q) = %v, want %q", tc.f, err, tc.detail)
		}
		if CheckFilter([]byte(tc.f)) == nil != (err == nil) {
			t.Errorf("CheckFilter on bytes disagrees for %q", tc.f)
		}
	}
}

func TestCheckTopicName(t *testing.T) {
	for topic, ok := range map[string]bool{
		"a": true, "a/b": true, "/": true, "$SYS/x": true, "ü/€": true,
		"": false, "a/+": false, "#": false, "a\x00": false, "\xed\xa0\x80": false,
	} {
		if err := CheckTopicName(topic); (err == nil) != ok || (err != nil && sentinelOf(err) != ErrTopicName) {
			t.Errorf("CheckTopicName(%q) = %v", topic, err)
		}
	}
}

func TestParseShared(t *testing.T) {
	for _, tc := range []struct{ f, group, rest string }{
		{"$share/g/a/b", "g", "a/b"}, {"$share/g/", "g", ""}, {"$share//a", "", "a"},
		{"$share/g", "", ""}, {"a/b", "", ""}, {"$shared/g/a", "", ""},
	} {
		g, r, ok := ParseShared([]byte(tc.f))
		if string(g) != tc.group || string(r) != tc.rest || ok != (strings.Count(tc.f, "/") >= 2 && strings.HasPrefix(tc.f, "$share/")) {
			t.Errorf("ParseShared(%q) = %q %q %v", tc.f, g, r, ok)
		}
	}
}

func TestMatchTopic(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true}, {"a/b", "a/c", false}, {"a/b", "a/b/c", false}, {"a/b/c", "a/b", false},
		{"#", "a/b", true}, {"#", "/", true}, {"a/#", "a", true}, {"a/#", "a/b/c", true}, {"a/#", "b", false},
		{"+", "a", true}, {"+", "a/b", false}, {"+", "", true}, {"+/+", "/", true}, {"a/+", "a/", true}, {"a/+", "a", false},
		{"+/b", "a/b", true}, {"a/+/c", "a/x/c", true}, {"a/+/c", "a/x/d", false},
		{"#", "$SYS/x", false}, {"+/x", "$SYS/x", false}, {"$SYS/#", "$SYS/x", true}, {"$SYS/+", "$SYS/x", true},
		{"telemetry/+/data", "telemetry/dev-1/data", true}, {"telemetry/+/data", "telemetry/dev-1/other", false},
	} {
		if got := MatchTopic(tc.filter, tc.topic); got != tc.want {
			t.Errorf("MatchTopic(%q, %q) = %v", tc.filter, tc.topic, got)
		}
		if got := MatchTopic([]byte(tc.filter), []byte(tc.topic)); got != tc.want {
			t.Errorf("MatchTopic on bytes (%q, %q) = %v", tc.filter, tc.topic, got)
		}
	}
}

// referenceMatch is the split-based definition of MQTT topic matching.
func referenceMatch(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	f, tp := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, lvl := range f {
		if lvl == "#" {
			return true
		}
		if i >= len(tp) || (lvl != "+" && lvl != tp[i]) {
			return false
		}
	}
	return len(f) == len(tp)
}
