package mqtt

import "edgeq/gateway/metrics"

// statusView is one bridge's counters with its connection state.
type statusView struct {
	Counters
	connected, subscribed bool
}

// WriteMetrics writes the MQTT bridges' families, labelled by bridge;
// nothing without a bridge.
func WriteMetrics(w *metrics.Writer, bridges []Status) {
	if len(bridges) == 0 {
		return
	}
	e := w.With(MetricsHelp)
	type cs = statusView
	per := []struct {
		name string
		typ  metrics.Type
		v    func(*cs) uint64
	}{
		{"edgeq_mqtt_connected", metrics.Gauge, func(c *cs) uint64 { return metrics.Bool(c.connected) }},
		{"edgeq_mqtt_subscribed", metrics.Gauge, func(c *cs) uint64 { return metrics.Bool(c.subscribed) }},
		{"edgeq_mqtt_queued", metrics.Gauge, func(c *cs) uint64 { return uint64(max(c.Queued, 0)) }},
		{"edgeq_mqtt_pending", metrics.Gauge, func(c *cs) uint64 { return uint64(max(c.Pending, 0)) }},
		{"edgeq_mqtt_received_total", metrics.Counter, func(c *cs) uint64 { return c.Received }},
		{"edgeq_mqtt_redelivered_total", metrics.Counter, func(c *cs) uint64 { return c.Redelivered }},
		{"edgeq_mqtt_stored_total", metrics.Counter, func(c *cs) uint64 { return c.Stored }},
		{"edgeq_mqtt_acked_total", metrics.Counter, func(c *cs) uint64 { return c.Acked }},
		{"edgeq_mqtt_deferred_total", metrics.Counter, func(c *cs) uint64 { return c.Deferred }},
		{"edgeq_mqtt_storage_errors_total", metrics.Counter, func(c *cs) uint64 { return c.StorageErrors }},
		{"edgeq_mqtt_connects_total", metrics.Counter, func(c *cs) uint64 { return c.Connects }},
		{"edgeq_mqtt_reconnects_total", metrics.Counter, func(c *cs) uint64 { return c.Reconnects }},
		{"edgeq_mqtt_connections_lost_total", metrics.Counter, func(c *cs) uint64 { return c.ConnectionsLost }},
		{"edgeq_mqtt_forced_reconnects_total", metrics.Counter, func(c *cs) uint64 { return c.ForcedReconnects }},
		{"edgeq_mqtt_subscribe_errors_total", metrics.Counter, func(c *cs) uint64 { return c.SubscribeErrors }},
		{"edgeq_mqtt_read_pauses_total", metrics.Counter, func(c *cs) uint64 { return c.ReadPauses }},
	}
	all := make([]cs, len(bridges))
	for i, b := range bridges {
		all[i] = cs{Counters: b.Counters, connected: b.Connected, subscribed: b.Subscribed}
	}
	for _, f := range per {
		e.Family(f.name, f.typ)
		for i, b := range bridges {
			e.Uint(f.name, f.v(&all[i]), "bridge", b.Name)
		}
	}
	byReason := []struct {
		name string
		m    func(*cs) map[Reason]uint64
	}{
		{"edgeq_mqtt_unmappable_total", func(c *cs) map[Reason]uint64 { return c.Unmappable }},
		{"edgeq_mqtt_rejected_total", func(c *cs) map[Reason]uint64 { return c.Rejected }},
		{"edgeq_mqtt_dropped_total", func(c *cs) map[Reason]uint64 { return c.Dropped }},
	}
	for _, f := range byReason {
		first := true
		for i, b := range bridges {
			m := f.m(&all[i])
			for _, r := range metrics.SortedKeys(m) {
				if first {
					e.Family(f.name, metrics.Counter)
					first = false
				}
				e.Uint(f.name, m[r], "bridge", b.Name, "reason", string(r))
			}
		}
	}
}

// MetricsHelp is the HELP text of the MQTT bridges' families.
var MetricsHelp = metrics.Help{
	"edgeq_mqtt_connected":               "Whether the MQTT bridge is connected to its broker (1).",
	"edgeq_mqtt_subscribed":              "Whether the MQTT bridge's subscriptions are in place (1).",
	"edgeq_mqtt_queued":                  "MQTT messages waiting for the bridge's appender.",
	"edgeq_mqtt_pending":                 "MQTT messages appended and waiting for durability or their ack.",
	"edgeq_mqtt_received_total":          "Messages the broker delivered to the MQTT bridge.",
	"edgeq_mqtt_redelivered_total":       "Messages the broker delivered with the DUP flag (redeliveries).",
	"edgeq_mqtt_stored_total":            "MQTT messages made durable in the log.",
	"edgeq_mqtt_acked_total":             "QoS 1/2 acknowledgements the bridge sent to the broker after storing.",
	"edgeq_mqtt_deferred_total":          "QoS 1/2 messages left unacknowledged so that the broker redelivers them (storage error, stopping, full queue).",
	"edgeq_mqtt_storage_errors_total":    "MQTT messages whose append failed (disk full, budget, I/O).",
	"edgeq_mqtt_connects_total":          "Successful connections of the MQTT bridge, the first included.",
	"edgeq_mqtt_reconnects_total":        "Successful connections of the MQTT bridge after the first.",
	"edgeq_mqtt_connections_lost_total":  "MQTT bridge connections that dropped.",
	"edgeq_mqtt_forced_reconnects_total": "MQTT connections the bridge closed itself to get unacknowledged messages redelivered.",
	"edgeq_mqtt_subscribe_errors_total":  "MQTT subscriptions that failed or were refused.",
	"edgeq_mqtt_read_pauses_total":       "Times the MQTT bridge held back socket reads while its queue was full.",
	"edgeq_mqtt_unmappable_total":        "MQTT messages without a valid device ID, by reason; they are acknowledged and not stored.",
	"edgeq_mqtt_rejected_total":          "MQTT messages the log refused for good, by reason; they are acknowledged.",
	"edgeq_mqtt_dropped_total":           "QoS 0 MQTT messages lost, by reason (QoS 0 is never redelivered).",
}
