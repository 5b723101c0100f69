package gateway

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"edgeq/gateway/config"
	"edgeq/gateway/tlsconf"
)

// Reload applies cfg (the config read again on SIGHUP) without a restart:
// the TLS certificate, key and CA files of the NATS, HTTP and NSQ
// listeners, the NATS auth token or users with their permissions,
// http.token, and the MQTT bridges, serial ports, Modbus buses and uplinks,
// of which only those that were added, removed or changed restart (see
// reloadBridges). New connections get the new credentials; connected
// clients stay.
//
// A change that needs a restart (any other key, TLS switched on or off, an
// uplink's queue group settings) refuses the whole reload by name and
// nothing changes; so does a TLS file that does not load. applied lists
// what was reloaded; log_level is the caller's. A bridge that fails to
// start is in err, the rest applied.
func (n *Node) Reload(cfg config.Config) (applied []string, err error) {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	old := n.applied
	if old == nil {
		old = &n.cfg
	}
	type tlsChange struct {
		key      string
		cur, new *tlsconf.Store
	}
	var changes []tlsChange
	var errs []error
	var restart []string
	for _, l := range []struct {
		key      string
		cur      *tlsconf.Store
		old, new config.TLS
	}{{"nats.tls", n.natsTLS, old.NATS.TLS, cfg.NATS.TLS}, {"http.tls", n.httpTLS, old.HTTP.TLS, cfg.HTTP.TLS},
		{"nsq.tls", n.nsqTLS, nsqTLSOf(*old), nsqTLSOf(cfg)}} {
		if (l.cur != nil) != l.new.Enabled() {
			restart = append(restart, l.key+" (switched on or off)") // a new listener
			continue
		}
		if l.cur == nil {
			continue
		}
		s, err := loadTLS(l.key, l.new)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, tlsChange{l.key, l.cur, s})
	}
	restart = append(restart, needRestart(*old, cfg)...)
	restart = append(restart, uplinkGroupChanges(*old, cfg)...)
	if len(restart) > 0 {
		return nil, fmt.Errorf("these changes need a restart: %s; nothing was applied", strings.Join(restart, ", "))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, c := range changes {
		c.cur.Adopt(c.new)
		applied = append(applied, c.key)
	}
	users, perms := natsUsers(cfg.NATS)
	n.nats.SetAuth(cfg.NATS.AuthToken.Reveal(), users, perms)
	if old.NATS.AuthToken != cfg.NATS.AuthToken || !reflect.DeepEqual(old.NATS.Users, cfg.NATS.Users) {
		applied = append(applied, "nats.auth_token and users")
	}
	token := cfg.HTTP.Token
	if token != *n.httpToken.Load() {
		applied = append(applied, "http.token")
	}
	n.httpToken.Store(&token)
	bridges, err := n.reloadBridges(cfg)
	applied = append(applied, bridges...)
	next := cfg
	n.applied = &next
	return applied, err
}

// needRestart lists the config keys (two levels deep) that differ between
// a and b, other than those Reload applies.
func needRestart(a, b config.Config) []string {
	for _, c := range []*config.Config{&a, &b} {
		c.NATS.AuthToken, c.NATS.Users, c.LogLevel, c.HTTP.Token = "", nil, "", ""
		c.NATS.TLS, c.HTTP.TLS, c.NSQ.TLS = config.TLS{}, config.TLS{}, config.TLS{}
		c.Serial, c.MQTT, c.Modbus, c.Uplinks = nil, nil, nil, nil
	}
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("yaml"), ",")
		fa, fb := va.Field(i), vb.Field(i)
		if reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		if fa.Kind() != reflect.Struct {
			out = append(out, name)
			continue
		}
		for j := 0; j < fa.NumField(); j++ {
			if !reflect.DeepEqual(fa.Field(j).Interface(), fb.Field(j).Interface()) {
				sub, _, _ := strings.Cut(fa.Type().Field(j).Tag.Get("yaml"), ",")
				out = append(out, fmt.Sprintf("%s.%s", name, sub))
			}
		}
	}
	return out
}

// CheckConfig reports what a reload would refuse in cfg beyond what
// config.Load validates: TLS certificate, key and CA files that do not load.
// `edgeq run --check` runs it so that `systemctl reload` fails, with the
// reason, before the running node is asked.
func CheckConfig(cfg config.Config) error {
	var errs []error
	for _, l := range []struct {
		key string
		tls config.TLS
	}{{"nats.tls", cfg.NATS.TLS}, {"http.tls", cfg.HTTP.TLS}, {"nsq.tls", nsqTLSOf(cfg)}} {
		if _, err := loadTLS(l.key, l.tls); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
