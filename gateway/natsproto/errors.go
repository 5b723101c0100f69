package natsproto

import (
	"errors"

	"edgeq/gateway/subject"
)

// Parser errors. The parser wraps them with context (the op, a snippet of the
// offending bytes); test with errors.Is. Every one of them means the byte
// stream can no longer be framed, so the parser stops (see Parser.Next).
var (
	// ErrUnknownOp: the control line does not start with a known verb.
	ErrUnknownOp = errors.New("natsproto: unknown protocol operation")
	// ErrControlLineTooLong: a control line exceeds Limits.MaxControlLine.
	ErrControlLineTooLong = errors.New("natsproto: control line too long")
	// ErrPayloadTooBig: a PUB/HPUB announces more than Limits.MaxPayload bytes.
	ErrPayloadTooBig = errors.New("natsproto: payload too big")
	// ErrBadArgs: a known verb with missing, extra or malformed arguments.
	ErrBadArgs = errors.New("natsproto: bad arguments")
	// ErrPayloadTerminator: the announced payload is not followed by CRLF,
	// so the announced size was wrong.
	ErrPayloadTerminator = errors.New("natsproto: payload not followed by CRLF")
)

// ErrUnreadInput is returned by Feed when the previous buffer has not been
// drained with Next yet. It is a caller bug and changes no parser state.
var ErrUnreadInput = errors.New("natsproto: Feed called before Next drained the previous buffer")

// CONNECT errors, returned by ParseConnect.
var (
	// ErrBadConnect: the CONNECT argument is not a JSON object of options.
	ErrBadConnect = errors.New("natsproto: malformed CONNECT options")
	// ErrInvalidProtocol: the client asks for a protocol version other than 0 or 1.
	ErrInvalidProtocol = errors.New("natsproto: invalid client protocol")
	// ErrNoRespondersRequiresHeaders: no_responders without headers.
	ErrNoRespondersRequiresHeaders = errors.New("natsproto: no responders requires headers support")
)

// Subject errors: the grammar's (gateway/subject), named as NATS names them
// (ClientError maps them to -ERR 'Invalid Subject' and 'Invalid Publish
// Subject').
var (
	// ErrInvalidSubject: a SUB filter that is not a valid subject filter.
	ErrInvalidSubject = subject.ErrInvalidFilter
	// ErrInvalidPublishSubject: a PUB subject that is empty, malformed or has wildcards.
	ErrInvalidPublishSubject = subject.ErrInvalidPublish
)

// Header block errors, returned by ParseHeader and the header appenders.
var (
	// ErrBadHeader: the block is not NATS/1.0 status line, fields, empty line.
	ErrBadHeader = errors.New("natsproto: malformed header block")
	// ErrHeaderTooBig: the block exceeds HeaderLimits.
	ErrHeaderTooBig = errors.New("natsproto: header block exceeds limits")
)
