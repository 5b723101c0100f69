package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const clear = "hunter2-CLEAR"

type holder struct {
	Name     string            `yaml:"name" json:"name"`
	Password String            `yaml:"password" json:"password"`
	Headers  map[string]String `yaml:"headers" json:"headers"`
	Ptr      *String           `yaml:"ptr" json:"ptr"`
}

// TestNoPrinterShowsIt formats a secret, alone and inside a struct, with
// every printer the node uses.
func TestNoPrinterShowsIt(t *testing.T) {
	s := String(clear)
	h := holder{Name: "n", Password: s, Headers: map[string]String{"Authorization": "Bearer " + clear}, Ptr: &s}
	var outs []string
	for _, verb := range []string{"%s", "%v", "%+v", "%#v", "%q", "%x", "%X", "%d", "%10s", "%-8v", "%T %v"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	outs = append(outs, fmt.Sprint(s, h), fmt.Sprintln(h), fmt.Errorf("connect: %w: %v", errors.New("x"), h).Error())
	for _, v := range []any{s, h, &h} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(j), string(y))
	}
	var text, js bytes.Buffer
	for _, lg := range []*slog.Logger{slog.New(slog.NewTextHandler(&text, nil)), slog.New(slog.NewJSONHandler(&js, nil))} {
		lg.Info("m", "secret", s, "holder", h, "ptr", &h, slog.Any("any", s), slog.Group("g", "p", s))
	}
	outs = append(outs, text.String(), js.String())
	for _, o := range outs {
		if strings.Contains(o, clear) || strings.Contains(o, fmt.Sprintf("%x", clear)) {
			t.Errorf("secret printed in clear: %s", o)
		}
	}
	if !strings.Contains(text.String(), Redacted) || !strings.Contains(fmt.Sprint(h), Redacted) {
		t.Errorf("no %s in %s / %v", Redacted, text.String(), h)
	}
}

func TestDecodesAsPlainString(t *testing.T) {
	var h holder
	if err := yaml.Unmarshal([]byte("password: 12345\nheaders: {Authorization: Bearer abc}\n"), &h); err != nil {
		t.Fatal(err)
	}
	if h.Password.Reveal() != "12345" || h.Headers["Authorization"].Reveal() != "Bearer abc" {
		t.Fatalf("%q %q", h.Password.Reveal(), h.Headers["Authorization"].Reveal())
	}
	if err := json.Unmarshal([]byte(`{"password":"p"}`), &h); err != nil || h.Password.Reveal() != "p" {
		t.Fatalf("%v %q", err, h.Password.Reveal())
	}
	var empty String
	if fmt.Sprint(empty) != "" || empty.IsSet() || !String("x").IsSet() || String("abc").Len() != 3 {
		t.Fatal("unset secret should print empty")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://tok@h:4222":            "nats://<hidden>@h:4222",
		"tcp://u:p@broker:1883":        "tcp://<hidden>@broker:1883",
		"https://u:p@h/x?y=a@b":        "https://<hidden>@h/x?y=a@b",
		"https://h/x?y=a@b":            "https://h/x?y=a@b",
		"nats://h:4222":                "nats://h:4222",
		"u:p@h:1:2":                    "<hidden>@h:1:2",
		"nats://a@b@h:x":               "nats://<hidden>@h:x",
		"ssl://user:pa%zzss@host:8883": "ssl://<hidden>@host:8883",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if URLUserinfo(in) != (in != want) {
			t.Errorf("URLUserinfo(%q) = %v", in, URLUserinfo(in))
		}
	}
}
