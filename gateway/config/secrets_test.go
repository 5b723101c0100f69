package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"edgeq/internal/secret"
)

// credentialKey matches a key path segment named like a credential. Paths
// (*_file) name where a credential is, not the credential.
var credentialKey = regexp.MustCompile(`(?i)(pass(word|wd|phrase)?$|token|secret|authorization|credential|api_?key|private_?key|cookie)`)

// recordHeaders are static headers copied into every stored record: data
// that every worker sees, not a credential of the node.
var recordHeaders = map[string]bool{"serial[0].headers": true, "mqtt[0].headers": true}

// credentialPaths are credentials not named like one: an upstream's
// request headers carry Authorization and API keys.
var credentialPaths = map[string]bool{"uplinks[0].http.headers": true}

func isCredential(path string) bool {
	for _, seg := range strings.Split(path, ".") {
		seg, _, _ = strings.Cut(seg, "[")
		if !strings.HasSuffix(seg, "_file") && credentialKey.MatchString(seg) {
			return true
		}
	}
	for p := range credentialPaths {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// fillStrings sets every string in v (through structs, pointers, slices of
// one element and maps of one entry) to a marker unique to its key path,
// and returns marker → path.
func fillStrings(v reflect.Value, path string, out map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillStrings(v.Elem(), path, out)
	case reflect.Struct:
		for name, f := range yamlFields(v.Type()) {
			fillStrings(v.FieldByIndex(f.Index), joinKey(path, name), out)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		fillStrings(v.Index(0), path+"[0]", out)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		key := "Authorization"
		if recordHeaders[path] {
			key = "X-Plain"
		}
		m := reflect.MakeMap(v.Type())
		val := reflect.New(v.Type().Elem()).Elem()
		fillStrings(val, joinKey(path, key), out)
		m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), val)
		v.Set(m)
	case reflect.String:
		marker := fmt.Sprintf("MARK%03dX", len(out))
		v.SetString(marker)
		out[marker] = path
	}
}

// TestNoCredentialPrints walks the whole configuration schema, sets every
// string to a marker, prints the configuration every way the node can
// (--print-config's YAML, JSON, fmt, slog, an error) and fails on any
// credential-named key whose value shows. It also checks that the others
// show, so a printer that prints nothing cannot pass.
func TestNoCredentialPrints(t *testing.T) {
	cfg := Default()
	markers := map[string]string{}
	fillStrings(reflect.ValueOf(&cfg).Elem(), "", markers)
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]string{"--print-config": string(out)}
	if j, err := json.Marshal(cfg); err != nil {
		t.Fatal(err)
	} else {
		printed["json"] = string(j)
	}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		printed["fmt "+verb] = fmt.Sprintf(verb, cfg)
	}
	printed["error"] = fmt.Errorf("config: %v", cfg).Error()
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("cfg", "cfg", cfg, "uplink", cfg.Uplinks[0], "mqtt", cfg.MQTT[0])
	slog.New(slog.NewJSONHandler(&js, nil)).Info("cfg", "cfg", cfg, "uplink", cfg.Uplinks[0], "mqtt", cfg.MQTT[0])
	printed["slog text"], printed["slog json"] = text.String(), js.String()

	credentials := 0
	for marker, path := range markers {
		cred := isCredential(path)
		if cred {
			credentials++
		}
		for how, s := range printed {
			shown := strings.Contains(s, marker)
			switch {
			case cred && shown:
				t.Errorf("%s: the credential %s prints in clear", how, path)
			case !cred && !shown && how == "--print-config":
				t.Errorf("%s: %s does not print at all", how, path)
			}
		}
	}
	// The known credentials, so that a renamed key cannot drop out unseen.
	for _, want := range []string{"nats.auth_token", "nats.users[0].password", "nsq.auth_token", "http.token", "cluster.secret",
		"mqtt[0].password", "uplinks[0].nats.token", "uplinks[0].nats.password", "uplinks[0].mqtt.password", "uplinks[0].http.headers.Authorization"} {
		found := false
		for _, p := range markers {
			found = found || p == want
		}
		if !found || !isCredential(want) {
			t.Errorf("%s: not in the schema walk or not seen as a credential", want)
		}
	}
	if credentials < 10 {
		t.Errorf("%d credentials found, want >= 10", credentials)
	}
}

// TestPlaceholderRefused: the printed form of a secret fed back as a file
// fails to load instead of running with "<hidden>" as the password.
func TestPlaceholderRefused(t *testing.T) {
	path := writeFile(t, "http:\n  token: \""+secret.Redacted+"\"\n")
	if _, err := Load(path, nil, Flags{}); err == nil || !strings.Contains(err.Error(), "http.token") {
		t.Fatalf("%v, want an error naming http.token", err)
	}
	path = writeFile(t, "uplinks:\n- name: up\n  type: http\n  http:\n    url: http://127.0.0.1:1/x\n    headers: {Authorization: \""+secret.Redacted+"\"}\n")
	if _, err := Load(path, nil, Flags{}); err == nil || !strings.Contains(err.Error(), "uplinks[0].http.headers.Authorization") {
		t.Fatalf("%v, want an error naming uplinks[0].http.headers.Authorization", err)
	}
}
