// Package natsproto is the framing layer of edgeq's NATS client protocol:
// a streaming parser for what clients send (CONNECT, PUB, HPUB, SUB, UNSUB,
// PING, PONG), the CONNECT options, header blocks, appending encoders for
// what the server sends (INFO, MSG, HMSG, +OK, -ERR, PING, PONG). The
// subject grammar (validation, matching) is gateway/subject's.
//
// It does no I/O and holds no server state: a connection's read loop feeds
// bytes to a Parser and acts on the ops it returns; what an op means is the
// server's business. Nothing here panics on bad input, and every buffer the
// package keeps is bounded by Limits.
package natsproto
