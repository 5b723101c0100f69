package serial

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"edgeq/internal/jsonfield"
)

// chunksFrom cuts data into reads whose lengths are taken from cuts in turn
// (a zero is an empty read); no cuts means one byte per read.
func chunksFrom(data, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return byteChunks(data)
	}
	var chunks [][]byte
	for i := 0; len(data) > 0 && i < 1<<16; i++ {
		n := min(int(cuts[i%len(cuts)]), len(data))
		chunks = append(chunks, data[:n])
		data = data[n:]
	}
	return append(chunks, data)
}

// refFrames is the framer's specification written the obvious way.
func refFrames(data []byte, limit int) (events []string, partial bool) {
	lines := bytes.Split(data, []byte("\n"))
	last := lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		l = bytes.TrimSuffix(l, []byte("\r"))
		switch {
		case len(l) > limit:
			events = append(events, "drop:oversize")
		case len(l) > 0:
			events = append(events, string(l))
		}
	}
	if len(last) > limit+1 {
		return append(events, "drop:oversize"), false
	}
	return events, len(last) > 0
}

// FuzzFramer checks the framer against refFrames for any stream cut anywhere:
// frames, oversize drops and the partial frame left over.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), []byte{1, 3}, uint8(2))
	f.Add([]byte("0123456789\nok\n"), []byte{4}, uint8(4))
	f.Fuzz(func(t *testing.T, data, cuts []byte, limit uint8) {
		lim := int(limit%64) + 1
		want, wantPartial := refFrames(data, lim)
		got, partial := framerEvents(lim, chunksFrom(data, cuts)...)
		if !slices.Equal(got, want) || partial != wantPartial {
			t.Fatalf("limit %d, stream %q cut by %v:\n got %q partial %v\nwant %q partial %v",
				lim, data, cuts, got, partial, want, wantPartial)
		}
	})
}

var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// refParseLine is the line format's specification written the obvious way.
func refParseLine(s string) (device string, obj map[string]any, ok bool) {
	obj = map[string]any{}
	for i, field := range strings.Split(s, ",") {
		field = strings.Trim(field, " \t")
		if field == "" {
			return "", nil, false
		}
		k, v, hasEq := strings.Cut(field, "=")
		if i == 0 && !hasEq {
			device = field
			continue
		}
		k, v = strings.Trim(k, " \t"), strings.Trim(v, " \t")
		if !hasEq || k == "" || len(k) > maxLineKeyLen || len(obj) >= maxLineFields ||
			strings.ContainsFunc(k, func(r rune) bool { return r > 0x7f || !nameByte(byte(r)) }) {
			return "", nil, false
		}
		if _, dup := obj[k]; dup {
			return "", nil, false
		}
		if _, err := strconv.ParseFloat(v, 64); err == nil && jsonNumberRE.MatchString(v) {
			obj[k] = json.Number(v)
		} else {
			obj[k] = v
		}
	}
	return device, obj, true
}

// FuzzParseLine checks the line parser against refParseLine and that every
// payload it produces is valid JSON.
func FuzzParseLine(f *testing.F) {
	f.Add("meter-1,t=21.5,h=40,s=ok")
	f.Add("t=1,q=\"x\\y\"")
	f.Fuzz(func(t *testing.T, line string) {
		if !utf8.ValidString(line) {
			return // the decoder drops those before parsing
		}
		var lp lineParser
		dev, out, err := lp.parse([]byte(line), nil)
		wantDev, wantObj, ok := refParseLine(line)
		if (err == nil) != ok {
			t.Fatalf("parse(%q) err %v, reference ok %v", line, err, ok)
		}
		if err != nil {
			return
		}
		if string(dev) != wantDev {
			t.Fatalf("parse(%q) device %q, want %q", line, dev, wantDev)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var got map[string]any
		if !json.Valid(out) || dec.Decode(&got) != nil {
			t.Fatalf("parse(%q) payload %s is not a JSON object", line, out)
		}
		if len(got) != len(wantObj) {
			t.Fatalf("parse(%q) = %s, want %v", line, out, wantObj)
		}
		for k, v := range wantObj {
			if got[k] != v {
				t.Fatalf("parse(%q) = %s: key %q is %#v, want %#v", line, out, k, got[k], v)
			}
		}
	})
}

// refJSONDevice looks the device up with encoding/json.
func refJSONDevice(doc []byte, path []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "", errJSONNoDevice
		}
		if v, ok = m[k]; !ok {
			return "", errJSONNoDevice
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		if jsonfield.IsInteger([]byte(x)) {
			return string(x), nil
		}
	}
	return "", errJSONBadDevice
}

// FuzzJSONDevice checks the device lookup against encoding/json on every
// valid UTF-8 JSON document.
func FuzzJSONDevice(f *testing.F) {
	f.Add(`{"meta":{"device":"d-3"},"id":"top"}`, "meta.device")
	f.Add(`{"id":1,"id":"\u0041"}`, "id")
	f.Fuzz(func(t *testing.T, doc, path string) {
		if !utf8.ValidString(doc) || !json.Valid([]byte(doc)) || len(path) > 256 {
			return
		}
		segs := strings.Split(path, ".")
		got, err := jsonDevice([]byte(doc), segs)
		want, wantErr := refJSONDevice([]byte(doc), segs)
		if !errors.Is(err, wantErr) || (err == nil && string(got) != want) {
			t.Fatalf("jsonDevice(%s, %q) = %q, %v; encoding/json says %q, %v", doc, path, got, err, want, wantErr)
		}
	})
}
