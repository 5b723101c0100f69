package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable the node reads.
const EnvPrefix = "EDGEQ_"

// EnvConfigFile names the config file when --config is not given.
const EnvConfigFile = EnvPrefix + "CONFIG"

// clientEnv are the variables of the client commands (pub, sub, status,
// bench); a node ignores them, so one shell can set both.
var clientEnv = map[string]bool{EnvPrefix + "SERVER": true, EnvPrefix + "TOKEN": true, EnvPrefix + "HTTP": true}

// Flags are the command-line overrides; empty fields are not set.
type Flags struct {
	DataDir, NATSListen, HTTPListen, NodeID, LogLevel string
}

// Load builds the configuration: defaults, then the YAML file at path (if
// not empty), then EDGEQ_* variables from environ, then flags; then validates.
func Load(path string, environ []string, flags Flags) (Config, error) {
	cfg, _, err := LoadWithNotes(path, environ, flags)
	return cfg, err
}

// LoadWithNotes is Load that also returns what the caller should log as
// warnings (EDGEQ_* variables that are not settings and were ignored).
func LoadWithNotes(path string, environ []string, flags Flags) (Config, []string, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, nil, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return cfg, nil, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	for i := range cfg.Serial {
		cfg.Serial[i] = cfg.Serial[i].WithDefaults()
	}
	notes, err := applyEnv(&cfg, environ)
	if err != nil {
		return cfg, notes, err
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.DataDir, flags.DataDir)
	set(&cfg.NATS.Listen, flags.NATSListen)
	set(&cfg.HTTP.Listen, flags.HTTPListen)
	set(&cfg.NodeID, flags.NodeID)
	set(&cfg.LogLevel, flags.LogLevel)
	return cfg, notes, cfg.Validate()
}

// decodeYAML decodes data over cfg, rejecting unknown keys with their path.
func decodeYAML(data []byte, cfg *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return nil // an empty file keeps the defaults
	}
	if err := checkKeys(root.Content[0], reflect.TypeOf(*cfg), ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(cfg)
}

// checkKeys walks a YAML mapping against a struct type so that an unknown key
// is reported as its full path ("nats.listn: unknown key (line 3)").
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := joinKey(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("%s: unknown key (line %d); known keys here: %s", key, k.Line, strings.Join(sortedNames(fields), ", "))
			}
			if err := checkKeys(v, f.Type, key); err != nil {
				return err
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, item := range n.Content {
			if err := checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), joinKey(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.AliasNode:
		return checkKeys(n.Alias, t, path)
	default:
		// A value: decode it alone, so that a bad one is reported by its
		// key path rather than by yaml's line and Go type.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			return fmt.Errorf("%s: %s (line %d)", path, valueError(n, t, err), n.Line)
		}
	}
	return nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// valueError says in words why n is not a t.
func valueError(n *yaml.Node, t reflect.Type, err error) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping, want " + kindName(t)
	case n.Kind == yaml.SequenceNode:
		return "a list, want " + kindName(t)
	}
	return scalarError(n.Value, t, err)
}

// scalarError says why the text value does not decode into t, e.g.
// `"banana" is not a duration (e.g. 500ms, 10s, 1h)`. A type that decodes
// itself (a byte size) says what it wants in its own error.
func scalarError(value string, t reflect.Type, err error) string {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  ")
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if _, after, ok := strings.Cut(rest, ": "); ok {
				msg = after
			}
		}
		return msg
	}
	return fmt.Sprintf("%q is not %s", value, kindName(t))
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

func kindName(t reflect.Type) string {
	if t == durationType {
		return "a duration (e.g. 500ms, 10s, 1h)"
	}
	if t == reflect.TypeOf(ByteSize(0)) {
		return "a size (e.g. 4096, 64KiB, 1MiB)"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct:
		return "a mapping of keys"
	case reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return "a " + t.Kind().String()
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

func sortedNames(m map[string]reflect.StructField) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// envSetting is one scalar that an environment variable can set.
type envSetting struct {
	key   string // yaml path, for messages
	field reflect.Value
}

// envSettings lists every scalar field by its variable name.
func envSettings(cfg *Config) map[string]envSetting {
	out := map[string]envSetting{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			fv := v.Field(i)
			key := joinKey(path, name)
			switch fv.Kind() {
			case reflect.Struct:
				walk(fv, key)
			case reflect.Slice, reflect.Map:
				// Lists (groups, users, bridges) come from the file only.
			default:
				out[EnvPrefix+strings.ToUpper(strings.ReplaceAll(key, ".", "_"))] = envSetting{key: key, field: fv}
			}
		}
	}
	walk(reflect.ValueOf(cfg).Elem(), "")
	return out
}

// applyEnv sets fields from EDGEQ_* variables. A variable that is not a
// setting is ignored with a note (scripts export EDGEQ_BIN, EDGEQ_SRC for
// their own use), unless its name is within two edits of a setting or
// differs from one only in case: that is a typo, refused with the setting
// it resembles, so that it does not silently run with the default. A value
// that does not parse is refused.
func applyEnv(cfg *Config, environ []string) (notes []string, err error) {
	settings := envSettings(cfg)
	var errs []error
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile || clientEnv[name] {
			continue
		}
		s, known := settings[name]
		if !known {
			if near := nearestSetting(name, settings); near != "" {
				errs = append(errs, fmt.Errorf("%s: unknown setting; did you mean %s? (a variable of your own must not be this close to a setting's name)", name, near))
			} else {
				notes = append(notes, fmt.Sprintf("%s is not a setting: ignored", name))
			}
			continue
		}
		if s.field.Kind() == reflect.String {
			s.field.SetString(value)
			continue
		}
		// Other scalars parse as YAML does, so "10s", "1MiB" and "true" mean
		// the same in the file and in the environment.
		ptr := reflect.New(s.field.Type())
		if err := yaml.Unmarshal([]byte(value), ptr.Interface()); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %s", name, s.key, scalarError(value, s.field.Type(), err)))
			continue
		}
		s.field.Set(ptr.Elem())
	}
	sort.Strings(notes)
	if len(errs) > 0 {
		return notes, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return notes, nil
}

// nearestSetting returns the setting that name looks like a typo of (case
// aside, or at most two edits away), or "".
func nearestSetting(name string, settings map[string]envSetting) string {
	up := strings.ToUpper(name)
	best, bestDist := "", 3
	for known := range settings {
		if d := editDistance(up, known); d < bestDist || d == bestDist && known < best {
			best, bestDist = known, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b (a
// swap of two neighbours counts as one edit).
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// EnvNames lists every EDGEQ_* variable the node understands, sorted.
func EnvNames() []string {
	cfg := Default()
	var names []string
	for name := range envSettings(&cfg) {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// YAML renders the configuration as a file that Load accepts.
func (c *Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}
