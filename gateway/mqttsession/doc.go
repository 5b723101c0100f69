// Package mqttsession holds the decision logic of the server side of an
// MQTT session as pure state machines: no I/O, no goroutines, no clock
// (every method that needs the time takes it as now).
//
//   - KeepAlive: the deadline by which a client must send something
//     (1.5 times its keep alive).
//   - Inbound: the client's QoS 1 and 2 PUBLISHes the server has not
//     finished acknowledging, bounded by the server's receive maximum; a
//     QoS 2 packet ID is remembered from the PUBLISH until its PUBREL, so a
//     resent PUBLISH is answered without being stored twice.
//   - Outbound: the server's QoS 1 and 2 deliveries in flight, bounded by
//     the client's receive maximum, with packet ID allocation and what to
//     resend (DUP) when a session resumes.
//   - InboundAliases: the 5.0 topic aliases a client sets on a connection,
//     bounded by the Topic Alias Maximum the server advertised.
//   - Will: when a will message is due (abnormal close only; after the
//     will delay in 5.0, unless the session resumes first).
//
// A runner owns one of each per session, feeds them packets and events,
// and performs the actions they return in order. The ordering duty the
// runner keeps: a PUBLISH is durable BEFORE Inbound.Stored is called, so a
// PUBACK or PUBREC is never sent for a reading that could be lost.
package mqttsession
