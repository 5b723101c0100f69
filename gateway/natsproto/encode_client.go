package natsproto

import "strconv"

// Encoders for what a client sends, for edgeq's own client commands (pub,
// sub, bench) and tests. Same contract as the server-side encoders.

// AppendPub appends "PUB <subject> [reply] <#bytes>\r\n<payload>\r\n".
func AppendPub(dst []byte, subject, reply string, payload []byte) []byte {
	dst = append(dst, "PUB "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	if reply != "" {
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(len(payload)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// AppendHPub appends "HPUB <subject> [reply] <#header bytes> <#total
// bytes>\r\n<header><payload>\r\n".
func AppendHPub(dst []byte, subject, reply string, header, payload []byte) []byte {
	dst = append(dst, "HPUB "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	if reply != "" {
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(len(header)), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(header)+len(payload)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, header...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// AppendSub appends "SUB <subject> [queue] <sid>\r\n".
func AppendSub(dst []byte, subject, queue, sid string) []byte {
	dst = append(dst, "SUB "...)
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	if queue != "" {
		dst = append(dst, queue...)
		dst = append(dst, ' ')
	}
	dst = append(dst, sid...)
	return append(dst, "\r\n"...)
}

// AppendUnsub appends "UNSUB <sid> [max]\r\n"; max 0 means none.
func AppendUnsub(dst []byte, sid string, max int64) []byte {
	dst = append(dst, "UNSUB "...)
	dst = append(dst, sid...)
	if max > 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, max, 10)
	}
	return append(dst, "\r\n"...)
}
