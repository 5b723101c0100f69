// Package modbus is edgeq's Modbus poller: Modbus RTU over a serial line
// (RS-485, through bridge/serial's Line on go.bug.st/serial) and Modbus TCP,
// with its own framing (CRC-16, the spec's 3.5-character silence, MBAP):
// the Go libraries served here either bring a second serial stack or take
// no transport of ours.
//
// A Bus polls its devices one request at a time. Each device's registers
// are read in as few requests as the spec allows (plan.go), decoded into
// typed, scaled values (value.go) and stored as one JSON record per poll:
//
//	{"ts":"2026-12-01T15:00:00.1Z","voltage":230.1,"running":true}
//	{"ts":"...","voltage":230.1,"quality":"exception","errors":{"power":"exception 2 (illegal data address) to function 3"}}
//
// Contract:
//   - A request takes at most the bus timeout (plus its time on the wire).
//     A failed request (timeout, CRC error, garbled frame, busy) is retried
//     after a backoff during which the other devices are polled; a device
//     that answers nothing has its polls spaced out up to max_backoff.
//   - An exception (other than busy) is the slave's final answer for those
//     registers: counted by code, logged and recorded with their names.
//   - Any read or write error of the port closes it; it is reopened with
//     backoff, resolving the path anew (a replugged adapter). Polls due
//     meanwhile are recorded with quality "unavailable".
//   - Records are appended through the node's Appender (durable like every
//     ingest); at most max_pending are outstanding, polling waits beyond.
//   - With on_change a poll is stored only when a value moved beyond its
//     deadband, the quality changed, or the heartbeat is due.
package modbus
