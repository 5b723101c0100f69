package natsproto

import "errors"

// clientErrors maps each sentinel to what nats-server writes in -ERR '...'
// and whether it closes the connection afterwards. The wording is the one
// NATS clients match on (docs.nats.io "Client Protocol", nats-server errors).
var clientErrors = []struct {
	err   error
	text  string
	close bool
}{
	{ErrUnknownOp, "Unknown Protocol Operation", true},
	// nats-server reports a missing CRLF after a payload as a parse error of
	// the next op, hence the same wording.
	{ErrPayloadTerminator, "Unknown Protocol Operation", true},
	{ErrControlLineTooLong, "Maximum Control Line Exceeded", true},
	{ErrPayloadTooBig, "Maximum Payload Violation", true},
	// nats-server closes silently on malformed arguments; the protocol
	// documentation names this case 'Parser Error'.
	{ErrBadArgs, "Parser Error", true},
	{ErrBadConnect, "Parser Error", true},
	{ErrInvalidProtocol, "Invalid Client Protocol", true},
	{ErrNoRespondersRequiresHeaders, "no responders requires headers support", true},
	{ErrInvalidSubject, "Invalid Subject", false},
	{ErrInvalidPublishSubject, "Invalid Publish Subject", false},
}

// ClientError returns the text a NATS server sends as -ERR '<text>' for err,
// and whether the connection must be closed after sending it. ok is false for
// errors this package does not know; the caller chooses then.
func ClientError(err error) (text string, closeConn bool, ok bool) {
	for _, e := range clientErrors {
		if errors.Is(err, e.err) {
			return e.text, e.close, true
		}
	}
	return "", false, false
}
