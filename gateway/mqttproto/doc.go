// Package mqttproto is the framing layer of an MQTT 3.1.1 and 5.0 server: a
// streaming parser for the control packets a client sends (and, for tests
// and tools, those a server sends), property and string validation, topic
// name and filter rules, and appending encoders.
//
// It does no I/O and holds no session state: a connection's read loop feeds
// bytes to a Parser and acts on the packets it returns; what a packet means
// (acks, sessions, topic aliases, wills) is the server's business. Nothing
// here panics on bad input, every buffer the package keeps is bounded by
// Limits, and every error names what was wrong and maps to an MQTT 5 reason
// code (ReasonCodeOf) or a 3.1.1 CONNACK refusal (ConnackCode311).
//
// Decoding a PUBLISH allocates nothing: topic, payload and property values
// are slices of the fed buffer, and user properties are read lazily from
// the raw property block (Properties.UserProperties).
package mqttproto
