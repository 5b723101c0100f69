package gateway

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"edgeq/bridge"
	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
)

// bridgeConfigs are the configs the running bridges and uplinks were made
// from, in the order of the node's lists.
type bridgeConfigs struct {
	serial  []serial.Config
	mqtt    []config.MQTTBridge
	modbus  []config.ModbusBus
	uplinks []config.Uplink
}

func bridgeConfigsOf(cfg config.Config) bridgeConfigs {
	return bridgeConfigs{serial: cfg.Serial, mqtt: cfg.MQTT, modbus: cfg.Modbus, uplinks: cfg.Uplinks}
}

// bridgeReloadStop bounds the drain of one bridge stopped by a reload.
const bridgeReloadStop = 10 * time.Second

// uplinkGroupChanges names the uplinks whose queue group would change
// (filter, credit, device window, ack_wait): the group keeps the settings
// it started with, so those need a restart.
func uplinkGroupChanges(old, cur config.Config) []string {
	var out []string
	for _, o := range old.Uplinks {
		for _, c := range cur.Uplinks {
			if o.Name != c.Name {
				continue
			}
			oc, cc := uplink.Config(o), uplink.Config(c)
			if oc.Subject != cc.Subject || !reflect.DeepEqual(uplinkQueueConfig(old, oc), uplinkQueueConfig(cur, cc)) {
				out = append(out, fmt.Sprintf("uplinks[%s] (subject, window, device_window, timeout, retry_*, rate_*: its queue group's settings)", o.Name))
			}
		}
	}
	return out
}

// reloadBridges stops the MQTT bridges, serial ports, Modbus buses and
// uplinks that are gone or changed in cfg and starts those that are new or
// changed; the others run on untouched. A stopped bridge drains first
// (what it read is stored, and acked upstream, before it stops); an uplink
// closed gives back what it held to its group, which delivers it to the
// new one. It returns what changed and the bridges that failed to start
// (they stay off until the next reload or restart).
func (n *Node) reloadBridges(cfg config.Config) (changed []string, err error) {
	n.bridgesMu.Lock()
	defer n.bridgesMu.Unlock()
	if n.stopping || n.runCtx == nil {
		return nil, errors.New("the node is stopping")
	}
	ctx, cur := n.runCtx, n.bridgeCfg
	var errs []error

	// Stop first: a changed bridge's new self may need the old one's serial
	// port or MQTT client ID.
	mStop, mStart := bridge.DiffByName(cur.mqtt, cfg.MQTT, func(c config.MQTTBridge) string { return c.Name })
	sStop, sStart := bridge.DiffByName(cur.serial, cfg.Serial, func(c serial.Config) string { return c.Name })
	bStop, bStart := bridge.DiffByName(cur.modbus, cfg.Modbus, func(c config.ModbusBus) string { return c.Name })
	uStop, uStart := bridge.DiffByName(cur.uplinks, cfg.Uplinks, func(c config.Uplink) string { return c.Name })
	for _, i := range mStop {
		changed = append(changed, "mqtt["+cur.mqtt[i].Name+"]")
		if err := n.mqtt[i].Stop(bridgeReloadStop); err != nil {
			n.logger.Warn("reload: stop mqtt bridge", "bridge", cur.mqtt[i].Name, "err", err)
		}
	}
	for _, i := range sStop {
		changed = append(changed, "serial["+cur.serial[i].Name+"]")
		if err := n.serial[i].Stop(bridgeReloadStop); err != nil {
			n.logger.Warn("reload: stop serial port", "port", cur.serial[i].Name, "err", err)
		}
	}
	for _, i := range bStop {
		changed = append(changed, "modbus["+cur.modbus[i].Name+"]")
		if err := n.modbus[i].Stop(bridgeReloadStop); err != nil {
			n.logger.Warn("reload: stop modbus bus", "bus", cur.modbus[i].Name, "err", err)
		}
	}
	for _, i := range uStop {
		changed = append(changed, "uplinks["+cur.uplinks[i].Name+"]")
		r := n.uplinks[i]
		r.u.Close()
		n.queues.Leave(r.key, groups.MemberID("uplink:"+r.u.Name()))
	}

	var next bridgeConfigs
	mqtts, mqttCfgs, mErrs := bridge.Restart(n.mqtt, cur.mqtt, cfg.MQTT, mStop, mStart, func(mc config.MQTTBridge) (*mqtt.Bridge, error) {
		b, err := mqtt.New(mqtt.Config(mc), n.id, n.ingest, n.logger)
		if err == nil {
			err = b.Start(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("mqtt bridge %s: %w", mc.Name, err)
		}
		return b, nil
	})
	ports, serialCfgs, sErrs := bridge.Restart(n.serial, cur.serial, cfg.Serial, sStop, sStart, func(sc serial.Config) (*serial.Port, error) {
		p, err := serial.New(sc, n.ingest, n.logger)
		if err == nil {
			err = p.Start(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("serial port %s: %w", sc.Name, err)
		}
		return p, nil
	})
	buses, modbusCfgs, bErrs := bridge.Restart(n.modbus, cur.modbus, cfg.Modbus, bStop, bStart, func(bc config.ModbusBus) (*modbus.Bus, error) {
		b, err := modbus.New(modbus.Config(bc), n.ingest, n.logger)
		if err == nil {
			err = b.Start(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("modbus bus %s: %w", bc.Name, err)
		}
		return b, nil
	})
	ups, uplinkCfgs, uErrs := bridge.Restart(n.uplinks, cur.uplinks, cfg.Uplinks, uStop, uStart, func(c config.Uplink) (*uplinkRun, error) {
		r, err := n.openUplink(cfg, c)
		if err != nil {
			return nil, err
		}
		n.goBackground(func() { r.u.Run(ctx) })
		if _, err := n.queues.Join(r.key, groups.MemberID("uplink:"+r.u.Name()), r.u, r.u.Window()); err != nil {
			r.u.Close()
			return nil, fmt.Errorf("uplink %s: join group: %w", c.Name, err)
		}
		return r, nil
	})
	next.mqtt, next.serial, next.modbus, next.uplinks = mqttCfgs, serialCfgs, modbusCfgs, uplinkCfgs
	errs = slices.Concat(errs, mErrs, sErrs, bErrs, uErrs)
	for _, j := range mStart {
		changed = appendOnce(changed, "mqtt["+cfg.MQTT[j].Name+"]")
	}
	for _, j := range sStart {
		changed = appendOnce(changed, "serial["+cfg.Serial[j].Name+"]")
	}
	for _, j := range bStart {
		changed = appendOnce(changed, "modbus["+cfg.Modbus[j].Name+"]")
	}
	for _, j := range uStart {
		changed = appendOnce(changed, "uplinks["+cfg.Uplinks[j].Name+"]")
	}
	n.mqtt, n.serial, n.modbus, n.uplinks, n.bridgeCfg = mqtts, ports, buses, ups, next
	return changed, errors.Join(errs...)
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// openUplink declares uplink c's queue group and builds its transport.
func (n *Node) openUplink(cfg config.Config, c config.Uplink) (*uplinkRun, error) {
	uc := uplink.Config(c)
	if uc.Subject == "" {
		uc.Subject = cfg.NATS.TelemetryPrefix + ".>"
	}
	key := groups.GroupKey{Filter: uc.Subject, Queue: uc.QueueName()}
	if err := n.queues.Declare(groups.GroupConfig{Key: key, Core: uplinkQueueConfig(cfg, uc)}); err != nil {
		return nil, fmt.Errorf("uplink %s: declare group: %w", uc.Name, err)
	}
	u, err := uplink.Open(uc, n.id, n.queues, n.logger)
	if err != nil {
		return nil, err
	}
	return &uplinkRun{u: u, key: key}, nil
}
