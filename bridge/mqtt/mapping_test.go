package mqtt

import (
	"errors"
	"strings"
	"testing"
)

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		template, topic string
		device          string // "" means no match
	}{
		{"sensors/{device}/telemetry", "sensors/t1/telemetry", "t1"},
		{"sensors/{device}/telemetry", "sensors/t1/status", ""},
		{"sensors/{device}/telemetry", "sensors/t1", ""},
		{"sensors/{device}/telemetry", "sensors/t1/telemetry/x", ""},
		{"sensors/{device}/telemetry", "sensors//telemetry", ""},
		{"sensors/{device}/telemetry", "other/t1/telemetry", ""},
		{"{device}", "t1", "t1"},
		{"{device}", "t1/x", ""},
		{"{device}", "", ""},
		{"+/{device}/data", "site/t1/data", "t1"},
		{"+/{device}/data", "/t1/data", "t1"},
		{"sensors/{device}/#", "sensors/t1", "t1"},
		{"sensors/{device}/#", "sensors/t1/a/b/c", "t1"},
		{"sensors/{device}/#", "sensors/t1/", "t1"},
		{"sensors/{device}/#", "sensors", ""},
		{"a/+/{device}", "a/b/c", "c"},
		{"a/+/{device}", "a/b", ""},
		{"{device}/#", "$SYS/broker", ""},
		{"+/{device}", "$SYS/broker", ""},
		{"$SYS/{device}", "$SYS/broker", "broker"},
	}
	for _, tt := range tests {
		tmpl, err := CompileTemplate(tt.template)
		if err != nil {
			t.Fatalf("CompileTemplate(%q): %v", tt.template, err)
		}
		got, ok := tmpl.Match(tt.topic)
		if ok != (tt.device != "") || got != tt.device {
			t.Errorf("%q.Match(%q) = %q, %v; want %q", tt.template, tt.topic, got, ok, tt.device)
		}
	}
}

func TestTemplateFilter(t *testing.T) {
	tests := map[string]string{
		"sensors/{device}/telemetry": "sensors/+/telemetry",
		"{device}/#":                 "+/#",
		"+/{device}":                 "+/+",
	}
	for tmpl, want := range tests {
		c, err := CompileTemplate(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Filter(); got != want || c.String() != tmpl {
			t.Errorf("%q: filter %q, string %q; want %q", tmpl, got, c.String(), want)
		}
	}
}

func TestCompileTemplateRejects(t *testing.T) {
	for _, s := range []string{"", "a/b", "{device}/{device}", "a{device}", "{device}x/y", "#/{device}",
		"{device}/a#", "{dev}/x", "a/{device}/+x", "a/\x00/{device}"} {
		if _, err := CompileTemplate(s); err == nil {
			t.Errorf("CompileTemplate(%q) accepted", s)
		}
	}
}

func TestValidateTopicFilter(t *testing.T) {
	for f, ok := range map[string]bool{
		"a/b": true, "#": true, "+": true, "a/+/b": true, "a/#": true, "/": true, "+/+/#": true,
		"": false, "a/#/b": false, "a#": false, "a/b+": false, "a/\x00": false, "\xff": false,
	} {
		if err := ValidateTopicFilter(f); (err == nil) != ok {
			t.Errorf("ValidateTopicFilter(%q) = %v, want ok=%v", f, err, ok)
		}
	}
}

func TestJSONFieldExtract(t *testing.T) {
	tests := []struct {
		path, payload string
		want          string
		err           error
	}{
		{"id", `{"id":"t1"}`, "t1", nil},
		{"meta.device", `{"meta":{"device":"t1"},"v":1}`, "t1", nil},
		{"meta.device", ` { "meta" : { "device" : "t\u0031" } } `, "t1", nil},
		{"id", `{"id":42}`, "42", nil},
		{"id", `{"id":-7}`, "-7", nil},
		{"id", `{"id":"a","id":"b"}`, "b", nil},
		{"id", `{"id":4.5}`, "", errFieldType},
		{"id", `{"id":1e3}`, "", errFieldType},
		{"id", `{"id":true}`, "", errFieldType},
		{"id", `{"id":null}`, "", errFieldType},
		{"id", `{"id":{"x":1}}`, "", errFieldType},
		{"id", `{"id":["t1"]}`, "", errFieldType},
		{"id", `{"other":"t1"}`, "", errMissingField},
		{"meta.device", `{"meta":"t1"}`, "", errMissingField},
		{"meta.device", `{"meta":null}`, "", errMissingField},
		{"meta.device", `{"meta":{}}`, "", errMissingField},
		{"id", `{"id":"t1"`, "", errBadJSON},
		{"id", `{"id":"t1"} trailing`, "", errBadJSON},
		{"id", `["t1"]`, "", errBadJSON},
		{"id", `"t1"`, "", errBadJSON},
		{"id", `null`, "", errBadJSON},
		{"id", ``, "", errBadJSON},
		{"id", "\xff", "", errBadJSON},
	}
	for _, tt := range tests {
		f, err := ParseJSONField(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Extract([]byte(tt.payload))
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%q in %s = %q, %v; want %q, %v", tt.path, tt.payload, got, err, tt.want, tt.err)
		}
	}
}

func TestParseJSONFieldRejects(t *testing.T) {
	for _, s := range []string{"", ".", "a.", ".a", "a..b", strings.Repeat("a.", 16) + "a"} {
		if _, err := ParseJSONField(s); err == nil {
			t.Errorf("ParseJSONField(%q) accepted", s)
		}
	}
}

func TestMapperReasons(t *testing.T) {
	byTopic, err := NewMapper(DeviceConfig{Topic: "s/{device}/t"})
	if err != nil {
		t.Fatal(err)
	}
	byField, err := NewMapper(DeviceConfig{JSONField: "d"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		m              *Mapper
		topic, payload string
		device         string
		reason         Reason
	}{
		{byTopic, "s/t1/t", "", "t1", ""},
		{byTopic, "s/node:7@site_a-1/t", "", "node:7@site_a-1", ""},
		{byTopic, "x/t1/t", "", "", ReasonNoMatch},
		{byTopic, "s/a b/t", "", "", ReasonBadDeviceID},
		{byTopic, "s/" + strings.Repeat("d", 129) + "/t", "", "", ReasonBadDeviceID},
		{byTopic, "s/é/t", "", "", ReasonBadDeviceID},
		{byField, "any", `{"d":"t1"}`, "t1", ""},
		{byField, "any", `{"d":""}`, "", ReasonBadDeviceID},
		{byField, "any", `{"d":"a/b"}`, "", ReasonBadDeviceID},
		{byField, "any", `{`, "", ReasonBadJSON},
		{byField, "any", `{}`, "", ReasonMissingField},
		{byField, "any", `{"d":false}`, "", ReasonFieldType},
	}
	for _, tt := range tests {
		d, r := tt.m.Device(tt.topic, []byte(tt.payload))
		if d != tt.device || r != tt.reason {
			t.Errorf("Device(%q, %s) = %q, %q; want %q, %q", tt.topic, tt.payload, d, r, tt.device, tt.reason)
		}
	}
	if _, err := NewMapper(DeviceConfig{}); err == nil {
		t.Error("empty device config accepted")
	}
	if _, err := NewMapper(DeviceConfig{Topic: "{device}", JSONField: "d"}); err == nil {
		t.Error("both mappings accepted")
	}
}

func TestTemplateMatchAllocatesNothing(t *testing.T) {
	tmpl, err := CompileTemplate("sensors/{device}/telemetry")
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { tmpl.Match("sensors/t1/telemetry") })
	if allocs != 0 {
		t.Fatalf("Match allocates %v times", allocs)
	}
}
