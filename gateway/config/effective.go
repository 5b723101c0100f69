package config

import (
	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/uplink"
	"edgeq/gateway/groups"
)

// Effective returns the configuration with every "0 or empty: a default"
// value replaced by the value the node runs with, for --print-config: a
// user reads device_share_msgs: 128, not 0. It loads back to the same node.
// node_id and an MQTT bridge's client_id stay empty when no node_id is set
// (the ID is generated once and kept in the data directory).
func (c Config) Effective() Config {
	q := groups.CoreConfig{ReadAheadMsgs: c.Queue.ReadAheadMsgs, ReadAheadBytes: int(c.Queue.ReadAheadBytes),
		DeviceShareMsgs: c.Queue.DeviceShareMsgs, DeviceShareBytes: int(c.Queue.DeviceShareBytes)}
	msgs, bytes := q.DeviceShare()
	c.Queue.DeviceShareMsgs, c.Queue.DeviceShareBytes = msgs, ByteSize(bytes)

	c.Groups = append([]Group(nil), c.Groups...)
	for i := range c.Groups {
		g := &c.Groups[i]
		g.Deliver = or(g.Deliver, "all") // a declared group starts at the oldest record
		g.Ordering = or(g.Ordering, "per_device")
		g.Strategy = or(g.Strategy, "random")
		if g.AckWait == 0 {
			g.AckWait = c.Queue.AckWait
		}
		if g.MaxDeliver == 0 {
			g.MaxDeliver = c.Queue.MaxDeliver
		}
		if g.MaxInFlight == 0 {
			g.MaxInFlight = c.Queue.MaxInFlight
		}
	}
	if c.Cluster.Name != "" && c.Cluster.MDNS == nil {
		on := true
		c.Cluster.MDNS = &on
	}
	c.MQTT = append([]MQTTBridge(nil), c.MQTT...)
	for i := range c.MQTT {
		m := mqtt.Config(c.MQTT[i])
		if len(m.Topics) == 0 {
			m.Topics = m.SubscribeTopics()
		}
		if m.ClientID == "" && c.NodeID != "" {
			m.ClientID = m.EffectiveClientID(c.NodeID)
		}
		c.MQTT[i] = MQTTBridge(m)
	}
	c.Modbus = append([]ModbusBus(nil), c.Modbus...)
	for i := range c.Modbus {
		c.Modbus[i] = ModbusBus(modbus.Config(c.Modbus[i]).WithDefaults())
	}
	c.Uplinks = append([]Uplink(nil), c.Uplinks...)
	for i := range c.Uplinks {
		u := uplink.Config(c.Uplinks[i])
		u.DeviceWindow = u.EffectiveDeviceWindow()
		u.Subject = or(u.Subject, c.NATS.TelemetryPrefix+".>")
		c.Uplinks[i] = Uplink(u)
	}
	return c
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
