package serial

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		in      string
		device  string
		payload string
		err     error
	}{
		{"meter-1,t=21.5,h=40", "meter-1", `{"t":21.5,"h":40}`, nil},
		{"meter-1", "meter-1", `{}`, nil},
		{" meter-1 , t = 21.5 ", "meter-1", `{"t":21.5}`, nil},
		{"t=1,h=2", "", `{"t":1,"h":2}`, nil},
		{"d,s=ok,e=,q=a=b", "d", `{"s":"ok","e":"","q":"a=b"}`, nil},
		{`d,s=say "hi" \o/`, "d", `{"s":"say \"hi\" \\o/"}`, nil},
		{"d,tab=a\tb,bell=\a", "d", `{"tab":"a\tb","bell":"\u0007"}`, nil},
		{"d,n=-0,e=1e3,E=2.5E-3,big=1e999", "d", `{"n":-0,"e":1e3,"E":2.5E-3,"big":"1e999"}`, nil},
		{"d,z=012,p=+5,x=0x10,u=1_000,dot=1.,lead=.5,inf=Inf,nan=NaN", "d",
			`{"z":"012","p":"+5","x":"0x10","u":"1_000","dot":"1.","lead":".5","inf":"Inf","nan":"NaN"}`, nil},
		{"d,bool=true", "d", `{"bool":"true"}`, nil},
		{"d,ü=1", "", "", errLineBadKey},
		{"d,a.b-c_d=1", "d", `{"a.b-c_d":1}`, nil},
		{"d,=1", "", "", errLineBadKey},
		{"d,t", "", "", errLineNoEquals},
		{"d,,t=1", "", "", errLineEmptyField},
		{"d,t=1,", "", "", errLineEmptyField},
		{",t=1", "", "", errLineEmptyField},
		{"", "", "", errLineEmptyField},
		{"d,t=1,t=2", "", "", errLineDuplicate},
		{"d," + strings.Repeat("k=1,", 0) + longKey(), "", "", errLineBadKey},
	}
	var lp lineParser
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			dev, out, err := lp.parse([]byte(tt.in), nil)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if string(dev) != tt.device || string(out) != tt.payload {
				t.Fatalf("parse = %q %s, want %q %s", dev, out, tt.device, tt.payload)
			}
			if !json.Valid(out) {
				t.Fatalf("payload %s is not valid JSON", out)
			}
		})
	}
}

func longKey() string { return strings.Repeat("k", maxLineKeyLen+1) + "=1" }

func TestParseLineFieldLimit(t *testing.T) {
	var lp lineParser
	fields := func(n int) string {
		var b strings.Builder
		b.WriteString("d")
		for i := range n {
			fmt.Fprintf(&b, ",k%d=%d", i, i)
		}
		return b.String()
	}
	if _, _, err := lp.parse([]byte(fields(maxLineFields)), nil); err != nil {
		t.Fatalf("%d fields: %v", maxLineFields, err)
	}
	if _, _, err := lp.parse([]byte(fields(maxLineFields+1)), nil); !errors.Is(err, errLineTooManyKeys) {
		t.Fatalf("%d fields: %v, want errLineTooManyKeys", maxLineFields+1, err)
	}
}

func TestParseLineReusesBuffer(t *testing.T) {
	var lp lineParser
	buf := make([]byte, 0, 256)
	frame := []byte("meter-1,t=21.5,h=40,s=ok")
	allocs := testing.AllocsPerRun(100, func() {
		_, out, err := lp.parse(frame, buf[:0])
		if err != nil || len(out) == 0 {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("parse allocates %.1f times per frame, want 0", allocs)
	}
}

func TestIsJSONNumber(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0", true}, {"-0", true}, {"7", true}, {"-12.50", true}, {"1e5", true}, {"1E+5", true},
		{"1.5e-300", true}, {strings.Repeat("9", 308), true},
		{"", false}, {"-", false}, {"01", false}, {"+1", false}, {"1.", false}, {".1", false},
		{"1e", false}, {"1e+", false}, {"0x1", false}, {"1_0", false}, {"Inf", false}, {"NaN", false},
		{" 1", false}, {"1 ", false}, {"1e400", false}, {strings.Repeat("9", 309), false},
	}
	for _, tt := range tests {
		if got := isJSONNumber([]byte(tt.in)); got != tt.want {
			t.Errorf("isJSONNumber(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestAppendJSONStringRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\x7f", "ünï €", "a\nb\rc\td"} {
		out := appendJSONString(nil, []byte(s))
		var back string
		if err := json.Unmarshal(out, &back); err != nil || back != s {
			t.Errorf("appendJSONString(%q) = %s, decodes to %q, %v", s, out, back, err)
		}
	}
}
