package modbus

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire formats, pure: building requests and checking responses for RTU
// (unit, PDU, CRC-16) and TCP (MBAP header, PDU). Nothing here does I/O.

// Errors of a response, by kind; each is counted under its own name.
var (
	// ErrTimeout: no complete response within the timeout.
	ErrTimeout = errors.New("response timeout")
	// ErrCRC: an RTU frame whose CRC does not match.
	ErrCRC = errors.New("crc mismatch")
	// ErrGarbled: a frame that is not the answer to the request (wrong unit,
	// function, length or transaction).
	ErrGarbled = errors.New("garbled response")
)

// ExceptionError is a slave's exception response.
type ExceptionError struct {
	Function byte
	Code     byte
}

func (e *ExceptionError) Error() string {
	return fmt.Sprintf("exception %d (%s) to function %d", e.Code, exceptionName(e.Code), e.Function)
}

// retryable says whether the slave asks to be asked again (busy or still
// working): other exceptions are final answers.
func (e *ExceptionError) retryable() bool { return e.Code == 5 || e.Code == 6 }

// exceptionName is the spec's name of an exception code.
func exceptionName(code byte) string {
	switch code {
	case 1:
		return "illegal function"
	case 2:
		return "illegal data address"
	case 3:
		return "illegal data value"
	case 4:
		return "server device failure"
	case 5:
		return "acknowledge"
	case 6:
		return "server device busy"
	case 8:
		return "memory parity error"
	case 10:
		return "gateway path unavailable"
	case 11:
		return "gateway target failed to respond"
	}
	return "unknown"
}

// request is one read: a function code, a start address and a quantity of
// registers or bits.
type request struct {
	unit byte
	fn   byte
	addr uint16
	qty  uint16
}

// dataLen is the byte count of a correct response's data.
func (q request) dataLen() int {
	if q.fn == 1 || q.fn == 2 {
		return (int(q.qty) + 7) / 8
	}
	return 2 * int(q.qty)
}

// appendPDU appends function, address and quantity.
func (q request) appendPDU(dst []byte) []byte {
	dst = append(dst, q.fn)
	dst = binary.BigEndian.AppendUint16(dst, q.addr)
	return binary.BigEndian.AppendUint16(dst, q.qty)
}

// crc16 is CRC-16/MODBUS (poly 0xA001 reflected, init 0xFFFF).
func crc16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, c := range b {
		crc = crc>>8 ^ crcTable[byte(crc)^c]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// appendRTU appends the RTU frame of q: unit, PDU, CRC low byte first.
func appendRTU(dst []byte, q request) []byte {
	start := len(dst)
	dst = append(dst, q.unit)
	dst = q.appendPDU(dst)
	return binary.LittleEndian.AppendUint16(dst, crc16(dst[start:]))
}

// rtuFrameLen is the length of the whole RTU response to q, known from its
// first three bytes (unit, function, byte count or exception code).
func rtuFrameLen(q request, head []byte) (int, error) {
	if len(head) < 3 {
		return 0, fmt.Errorf("%w: %d-byte header", ErrGarbled, len(head))
	}
	if head[0] != q.unit {
		return 0, fmt.Errorf("%w: unit %d, want %d", ErrGarbled, head[0], q.unit)
	}
	switch head[1] {
	case q.fn | 0x80:
		return 5, nil
	case q.fn:
		if int(head[2]) != q.dataLen() {
			return 0, fmt.Errorf("%w: byte count %d, want %d", ErrGarbled, head[2], q.dataLen())
		}
		return 3 + int(head[2]) + 2, nil
	}
	return 0, fmt.Errorf("%w: function %d, want %d", ErrGarbled, head[1], q.fn)
}

// parseRTU checks a whole RTU response to q and returns its data bytes
// (aliasing frame), or an *ExceptionError, ErrCRC or ErrGarbled.
func parseRTU(q request, frame []byte) ([]byte, error) {
	n, err := rtuFrameLen(q, frame)
	if err != nil {
		return nil, err
	}
	if len(frame) != n {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrGarbled, len(frame), n)
	}
	if got, want := binary.LittleEndian.Uint16(frame[n-2:]), crc16(frame[:n-2]); got != want {
		return nil, fmt.Errorf("%w: %04x, want %04x", ErrCRC, got, want)
	}
	return parsePDU(q, frame[1:n-2])
}

// parsePDU checks a response PDU (function, byte count, data; or function
// | 0x80, exception code) and returns the data.
func parsePDU(q request, pdu []byte) ([]byte, error) {
	if len(pdu) < 2 {
		return nil, fmt.Errorf("%w: %d-byte PDU", ErrGarbled, len(pdu))
	}
	switch pdu[0] {
	case q.fn | 0x80:
		if len(pdu) != 2 {
			return nil, fmt.Errorf("%w: exception PDU of %d bytes", ErrGarbled, len(pdu))
		}
		return nil, &ExceptionError{Function: q.fn, Code: pdu[1]}
	case q.fn:
	default:
		return nil, fmt.Errorf("%w: function %d, want %d", ErrGarbled, pdu[0], q.fn)
	}
	if int(pdu[1]) != q.dataLen() || len(pdu) != 2+q.dataLen() {
		return nil, fmt.Errorf("%w: byte count %d and %d data bytes, want %d", ErrGarbled, pdu[1], len(pdu)-2, q.dataLen())
	}
	return pdu[2:], nil
}

// mbapLen is the MBAP header: transaction, protocol, length, unit.
const mbapLen = 7

// maxTCPFrame is the largest Modbus TCP ADU (MBAP + 253-byte PDU).
const maxTCPFrame = mbapLen + 253

// appendTCP appends the Modbus TCP frame of q with transaction tx.
func appendTCP(dst []byte, tx uint16, q request) []byte {
	dst = binary.BigEndian.AppendUint16(dst, tx)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, 6)
	dst = append(dst, q.unit)
	return q.appendPDU(dst)
}

// parseMBAP reads a response header: its transaction and the length of the
// PDU that follows.
func parseMBAP(head []byte) (tx uint16, unit byte, pduLen int, err error) {
	if len(head) < mbapLen {
		return 0, 0, 0, fmt.Errorf("%w: %d-byte MBAP header", ErrGarbled, len(head))
	}
	tx = binary.BigEndian.Uint16(head)
	if proto := binary.BigEndian.Uint16(head[2:]); proto != 0 {
		return tx, 0, 0, fmt.Errorf("%w: protocol %d, want 0", ErrGarbled, proto)
	}
	n := int(binary.BigEndian.Uint16(head[4:]))
	if n < 3 || mbapLen-1+n > maxTCPFrame {
		return tx, 0, 0, fmt.Errorf("%w: MBAP length %d", ErrGarbled, n)
	}
	return tx, head[6], n - 1, nil
}
