// Package mqtt is edgeq's MQTT ingest bridge: it subscribes to topic filters
// on a broker with paho.mqtt.golang, maps each message to a device ID (a topic
// template or a JSON field) and appends it to the log.
//
// Promises:
//   - A QoS 1/2 message is acked to the broker only after its record is
//     durable (auto-ack off, Ack after the append completes). A crash of
//     edgeq loses nothing the broker was told is stored; what was not acked is
//     redelivered (the log may then hold a duplicate, which the device's own
//     counter or message ID lets a consumer drop).
//   - Acks leave in arrival order: mosquitto 2.0.11 reorders its later
//     deliveries when PUBACKs arrive out of order, and appends to different
//     partitions complete out of order.
//   - The session is persistent (CleanSession false, a stable client ID) and
//     every connection resubscribes, so a restarted broker or bridge resumes,
//     even a broker that lost its state.
//   - paho's router is never blocked: messages go into a bounded queue; one
//     worker appends them in arrival order, so a device's records keep the
//     order in which the broker delivered them. While the queue is a quarter
//     full the bridge stops reading the socket for up to a second, so that a
//     burst waits in the broker (mosquitto 2.0.11 does not hold back at
//     max_inflight_messages for an online client).
//   - A message with no valid device (no template match, bad ID, bad JSON,
//     missing field) is acked, counted by reason and logged at a limited
//     rate: left unacked it would hold a slot of the broker's in-flight window
//     for good and, after 20 such messages (mosquitto's default), stall the
//     session.
//   - A storage error (disk full, retention budget, I/O) is not acked. The
//     bridge takes nothing more from that connection, then breaks it after a
//     jittered backoff; on the next connection the broker redelivers all it
//     holds unacked, in order. QoS 0 messages have no redelivery: they are
//     dropped and counted.
//
// What the broker must do for "no loss" to hold end to end (mosquitto):
//   - keep the session while the bridge is away or stalled and queue enough
//     for it: max_queued_messages defaults to 1000 per client, beyond which
//     mosquitto drops messages for the session (set 0 or a large value);
//   - persist its state (persistence true). kill -9 of mosquitto can still
//     lose messages it acked to publishers but had not saved (GOTCHAS 4.4),
//     and with no saved state the new instance drops what arrives before the
//     bridge has resubscribed.
//
// Known limits: mosquitto 2.0.11 can reorder a queued backlog on reconnect
// (GOTCHAS 4.4), so per-device order is at best the broker's; retained
// messages are delivered again on every resubscribe; if an append fails and a
// later one of the same device succeeds (a transient I/O error between two
// group commits), the redelivered message lands after the later one.
package mqtt
