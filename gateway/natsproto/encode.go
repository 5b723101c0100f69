package natsproto

import (
	"strconv"
	"strings"
)

// Encoders for what the server sends. Each appends one complete frame to
// dst and returns the extended slice; with enough capacity in dst they do
// not allocate. Subjects, sids and reply subjects must be valid protocol
// tokens (no spaces or control bytes; see subject.ValidPublish): the server
// only passes on what it validated when it came in.

// AppendMsg appends "MSG <subject> <sid> [reply] <#bytes>\r\n<payload>\r\n".
func AppendMsg(dst []byte, subject, sid, reply string, payload []byte) []byte {
	dst = append(dst, "MSG "...)
	dst = appendTokens(dst, subject, sid, reply)
	dst = strconv.AppendInt(dst, int64(len(payload)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// AppendHMsg appends "HMSG <subject> <sid> [reply] <#header bytes>
// <#total bytes>\r\n<header><payload>\r\n". header is a complete header
// block, as built with AppendHeaderStart/Field/End.
func AppendHMsg(dst []byte, subject, sid, reply string, header, payload []byte) []byte {
	dst = append(dst, "HMSG "...)
	dst = appendTokens(dst, subject, sid, reply)
	dst = strconv.AppendInt(dst, int64(len(header)), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(header)+len(payload)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, header...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// appendTokens appends "a b [c] ", skipping an empty optional c.
func appendTokens(dst []byte, a, b, optional string) []byte {
	dst = append(dst, a...)
	dst = append(dst, ' ')
	dst = append(dst, b...)
	dst = append(dst, ' ')
	if optional != "" {
		dst = append(dst, optional...)
		dst = append(dst, ' ')
	}
	return dst
}

// AppendOK appends "+OK\r\n".
func AppendOK(dst []byte) []byte { return append(dst, "+OK\r\n"...) }

// AppendPing appends "PING\r\n".
func AppendPing(dst []byte) []byte { return append(dst, "PING\r\n"...) }

// AppendPong appends "PONG\r\n".
func AppendPong(dst []byte) []byte { return append(dst, "PONG\r\n"...) }

// AppendErr appends "-ERR '<msg>'\r\n", msg being e.g. the text from
// ClientError. CR and LF in msg become spaces so the frame stays one line.
func AppendErr(dst []byte, msg string) []byte {
	dst = append(dst, "-ERR '"...)
	if strings.ContainsAny(msg, "\r\n") {
		for i := 0; i < len(msg); i++ {
			c := msg[i]
			if c == '\r' || c == '\n' {
				c = ' '
			}
			dst = append(dst, c)
		}
	} else {
		dst = append(dst, msg...)
	}
	return append(dst, "'\r\n"...)
}
