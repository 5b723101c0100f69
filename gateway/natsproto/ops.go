package natsproto

// OpKind names a client protocol operation.
type OpKind uint8

// The operations a client sends. The zero value is not an op.
const (
	OpConnect OpKind = iota + 1 // CONNECT <json>
	OpPub                       // PUB <subject> [reply] <#bytes>
	OpHPub                      // HPUB <subject> [reply] <#header bytes> <#total bytes>
	OpSub                       // SUB <subject> [queue] <sid>
	OpUnsub                     // UNSUB <sid> [max]
	OpPing                      // PING
	OpPong                      // PONG
)

// String returns the verb as clients write it.
func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return "OpKind(?)"
}

var opNames = [...]string{
	OpConnect: "CONNECT",
	OpPub:     "PUB",
	OpHPub:    "HPUB",
	OpSub:     "SUB",
	OpUnsub:   "UNSUB",
	OpPing:    "PING",
	OpPong:    "PONG",
}

// Op is one parsed client operation. Its byte slices point into the buffer
// given to Parser.Feed or into the parser's scratch; they stay valid and
// unchanged until the next call to Feed or Reset, so a server may collect
// all ops of one read (for one group commit) without copying. Copy whatever
// must live longer. Fields an op does not use are nil.
type Op struct {
	Kind OpKind
	// Subject: PUB and HPUB subject, SUB filter. Not validated here; see
	// subject.CheckPublish and subject.CheckFilter.
	Subject []byte
	// Reply: optional PUB/HPUB reply subject (nil when absent).
	Reply []byte
	// Queue: optional SUB queue group (nil when absent).
	Queue []byte
	// SID: SUB and UNSUB subscription id, an opaque client token.
	SID []byte
	// Max: UNSUB auto-unsubscribe count; 0 means none (unsubscribe now),
	// as in nats-server.
	Max int64
	// Header: HPUB header block as sent, "NATS/1.0...\r\n\r\n"; see ParseHeader.
	// Nil for PUB and for an HPUB whose header size is 0, which nats-server
	// (and so every client) takes as a message without headers.
	Header []byte
	// Payload: PUB/HPUB message body, without headers or trailing CRLF.
	// Empty but not nil for a zero-length body.
	Payload []byte
	// Connect: the CONNECT argument, a JSON object; see ParseConnect.
	Connect []byte
}
