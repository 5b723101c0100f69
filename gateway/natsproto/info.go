package natsproto

import (
	"strconv"
	"unicode/utf8"
)

// Info is what the server announces in INFO when a client connects.
type Info struct {
	ServerID     string `json:"server_id"`
	ServerName   string `json:"server_name"`
	Version      string `json:"version"`
	EdgeqVersion string `json:"edgeq_version,omitempty"` // edgeq's own semver (Version is what NATS clients compare)
	Go           string `json:"go"`
	Host         string `json:"host"`
	Port         int    `json:"port"`
	Headers      bool   `json:"headers"`     // server accepts HPUB and sends HMSG
	MaxPayload   int64  `json:"max_payload"` // Limits.MaxPayload
	Proto        int    `json:"proto"`       // 1: the client may receive INFO updates
	AuthRequired bool   `json:"auth_required,omitempty"`
	TLSRequired  bool   `json:"tls_required,omitempty"`
	ClientID     uint64 `json:"client_id,omitempty"`
	ClientIP     string `json:"client_ip,omitempty"`
	JetStream    bool   `json:"jetstream,omitempty"`
}

// AppendInfo appends "INFO {json}\r\n", written without reflection or
// allocation. encoding/json decodes the JSON back into an equal Info, with
// invalid UTF-8 replaced by U+FFFD as json.Marshal would. No raw control
// byte, CR or LF in particular, appears before the final CRLF.
func AppendInfo(dst []byte, info *Info) []byte {
	dst = append(dst, "INFO {"...)
	dst = appendJSONField(dst, "server_id", true)
	dst = appendJSONString(dst, info.ServerID)
	dst = appendJSONField(dst, "server_name", false)
	dst = appendJSONString(dst, info.ServerName)
	dst = appendJSONField(dst, "version", false)
	dst = appendJSONString(dst, info.Version)
	if info.EdgeqVersion != "" {
		dst = appendJSONField(dst, "edgeq_version", false)
		dst = appendJSONString(dst, info.EdgeqVersion)
	}
	dst = appendJSONField(dst, "go", false)
	dst = appendJSONString(dst, info.Go)
	dst = appendJSONField(dst, "host", false)
	dst = appendJSONString(dst, info.Host)
	dst = appendJSONField(dst, "port", false)
	dst = strconv.AppendInt(dst, int64(info.Port), 10)
	dst = appendJSONField(dst, "headers", false)
	dst = strconv.AppendBool(dst, info.Headers)
	dst = appendJSONField(dst, "max_payload", false)
	dst = strconv.AppendInt(dst, info.MaxPayload, 10)
	dst = appendJSONField(dst, "proto", false)
	dst = strconv.AppendInt(dst, int64(info.Proto), 10)
	if info.AuthRequired {
		dst = appendJSONField(dst, "auth_required", false)
		dst = append(dst, "true"...)
	}
	if info.TLSRequired {
		dst = appendJSONField(dst, "tls_required", false)
		dst = append(dst, "true"...)
	}
	if info.JetStream {
		dst = appendJSONField(dst, "jetstream", false)
		dst = append(dst, "true"...)
	}
	if info.ClientID != 0 {
		dst = appendJSONField(dst, "client_id", false)
		dst = strconv.AppendUint(dst, info.ClientID, 10)
	}
	if info.ClientIP != "" {
		dst = appendJSONField(dst, "client_ip", false)
		dst = appendJSONString(dst, info.ClientIP)
	}
	return append(dst, "}\r\n"...)
}

// appendJSONField appends `"name":`, preceded by a comma unless first.
func appendJSONField(dst []byte, name string, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control bytes escaped, invalid UTF-8 replaced by U+FFFD, and U+2028/U+2029
// escaped as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < ' ' || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
