// Package apiv1 holds the JSON documents of the node's HTTP API (/v1/...):
// what GET /v1/status, /v1/devices/{device}, /v1/groups and
// POST /v1/publish/{device} answer, and what `edgeq status` and
// `edgeq groups` decode. It imports no edgeq package, so a client needs
// nothing else of edgeq to read the API.
//
// The components report in these types where their snapshot is the wire
// document itself (serial.Status, mqtt.Status, cluster.PeerStatus, ... are
// aliases of them): one definition, one wire format. A field added here is
// a change of the API: add, never rename or remove.
package apiv1
