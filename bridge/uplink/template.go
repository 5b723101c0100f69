package uplink

import (
	"fmt"
	"strings"
)

// Syntax is the upstream's name syntax a template renders to.
type Syntax struct {
	kind string
	sep  byte
	bad  string // characters a literal part must not hold
}

// SubjectSyntax is a NATS subject: '.'-separated tokens without wildcards.
// TopicSyntax is an MQTT topic name: '/'-separated levels without wildcards.
var (
	SubjectSyntax = Syntax{kind: "subject", sep: '.', bad: "*> \t\r\n"}
	TopicSyntax   = Syntax{kind: "topic", sep: '/', bad: "+#\x00"}
)

// Template renders an upstream subject or topic from a record: literal text
// with {device} and {node} placeholders. Device and node IDs are
// [A-Za-z0-9_:@-], valid in any subject token and topic level.
type Template struct {
	parts []part
}

type part struct {
	lit string
	ph  byte // 0 literal, 'd' device, 'n' node
}

// CompileTemplate parses s for syntax.
func CompileTemplate(s string, syn Syntax) (*Template, error) {
	if s == "" {
		return nil, fmt.Errorf("empty %s template", syn.kind)
	}
	t := &Template{}
	rest := s
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("template %q: unclosed {", s)
		}
		switch rest[i : i+j+1] {
		case "{device}":
			t.parts = append(t.parts, part{ph: 'd'})
		case "{node}":
			t.parts = append(t.parts, part{ph: 'n'})
		default:
			return nil, fmt.Errorf("template %q: unknown placeholder %s, want {device} or {node}", s, rest[i:i+j+1])
		}
		rest = rest[i+j+1:]
	}
	for _, p := range t.parts {
		if strings.ContainsAny(p.lit, syn.bad+"}") {
			return nil, fmt.Errorf("template %q: %q is not allowed in a %s", s, p.lit, syn.kind)
		}
	}
	// An empty token or level: render with sample IDs and look.
	sample := t.Render(nil, "d", "n")
	for _, tok := range strings.Split(string(sample), string(syn.sep)) {
		if tok == "" {
			return nil, fmt.Errorf("template %q: empty %s token", s, syn.kind)
		}
	}
	return t, nil
}

// Render appends the name for device and node to dst.
func (t *Template) Render(dst []byte, device, node string) []byte {
	for _, p := range t.parts {
		switch p.ph {
		case 'd':
			dst = append(dst, device...)
		case 'n':
			dst = append(dst, node...)
		default:
			dst = append(dst, p.lit...)
		}
	}
	return dst
}
