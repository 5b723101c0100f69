package uplink

import (
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	tests := []struct {
		tmpl string
		syn  Syntax
		want string // rendered for device "dev-1", node "gw:a"; "" = refused
	}{
		{"plant3.{device}", SubjectSyntax, "plant3.dev-1"},
		{"{node}.{device}.raw", SubjectSyntax, "gw:a.dev-1.raw"},
		{"p.x{device}y", SubjectSyntax, "p.xdev-1y"},
		{"fixed", SubjectSyntax, "fixed"},
		{"dt/{node}/{device}", TopicSyntax, "dt/gw:a/dev-1"},
		{"", SubjectSyntax, ""},
		{"p.*", SubjectSyntax, ""},
		{"p.>", SubjectSyntax, ""},
		{"p q", SubjectSyntax, ""},
		{"p..{device}", SubjectSyntax, ""},
		{".{device}", SubjectSyntax, ""},
		{"p.{device", SubjectSyntax, ""},
		{"p.{dev}", SubjectSyntax, ""},
		{"p.device}", SubjectSyntax, ""},
		{"a/+/{device}", TopicSyntax, ""},
		{"a/#", TopicSyntax, ""},
		{"a//{device}", TopicSyntax, ""},
	}
	for _, tt := range tests {
		tp, err := CompileTemplate(tt.tmpl, tt.syn)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%q compiled, want refused", tt.tmpl)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.tmpl, err)
			continue
		}
		if got := string(tp.Render(nil, "dev-1", "gw:a")); got != tt.want {
			t.Errorf("%q rendered %q, want %q", tt.tmpl, got, tt.want)
		}
	}
}

// FuzzCompileTemplate: any input compiles or is refused without a panic,
// and a compiled template renders a valid subject for any valid device ID.
func FuzzCompileTemplate(f *testing.F) {
	for _, s := range []string{"plant3.{device}", "{node}.{device}", "a/{device}/b", "p..x", "{", "}{device}", "a.*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, syn := range []Syntax{SubjectSyntax, TopicSyntax} {
			tp, err := CompileTemplate(s, syn)
			if err != nil {
				continue
			}
			out := string(tp.Render(nil, "dev_1:@-x", "node-1"))
			if out == "" || strings.ContainsAny(out, syn.bad) {
				t.Fatalf("%q rendered %q", s, out)
			}
			for _, tok := range strings.Split(out, string(syn.sep)) {
				if tok == "" {
					t.Fatalf("%q rendered %q with an empty token", s, out)
				}
			}
		}
	})
}
