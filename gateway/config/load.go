package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

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
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	for i := range cfg.Serial {
		cfg.Serial[i] = cfg.Serial[i].WithDefaults()
	}
	if err := applyEnv(&cfg, environ); err != nil {
		return cfg, err
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
	return cfg, cfg.Validate()
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
	}
	return nil
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

// applyEnv sets fields from EDGEQ_* variables; an unknown variable is an error
// so that a typo does not silently run with the default.
func applyEnv(cfg *Config, environ []string) error {
	settings := envSettings(cfg)
	var errs []error
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile || clientEnv[name] {
			continue
		}
		s, known := settings[name]
		if !known {
			errs = append(errs, fmt.Errorf("%s: unknown setting", name))
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
			errs = append(errs, fmt.Errorf("%s (%s): %q: %v", name, s.key, value, err))
			continue
		}
		s.field.Set(ptr.Elem())
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
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
