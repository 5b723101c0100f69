package serial

import (
	"encoding/json"
	"errors"
	"fmt"

	"edgeq/wal"
)

var (
	errNonUTF8     = errors.New("frame is not valid UTF-8")
	errInvalidJSON = errors.New("json: frame is not a valid JSON document")
	errNoDevice    = errors.New("frame names no device and no device is configured")
)

// decoder turns a frame into a device ID and a payload according to a
// port's format. It is pure and not safe for concurrent use.
type decoder struct {
	format Format
	path   []string // json device field
	static string   // configured device: required for raw, overrides json and line
	line   lineParser
	// last is the previous frame's device: a port usually carries one or a
	// few devices, so most frames reuse its string instead of allocating.
	last string
}

func newDecoder(cfg Config) (*decoder, error) {
	d := &decoder{format: cfg.Format, static: cfg.Device}
	if cfg.Format == FormatJSON && cfg.DeviceField != "" {
		path, err := splitDevicePath(cfg.DeviceField)
		if err != nil {
			return nil, err
		}
		d.path = path
	}
	return d, nil
}

// decode returns the frame's device and its payload appended to dst[:0], or
// why it must be dropped (with an error for the logs).
func (d *decoder) decode(frame, dst []byte) (device string, payload []byte, drop DropReason, err error) {
	if !validUTF8(frame) {
		return "", dst, DropNonUTF8, errNonUTF8
	}
	var dev []byte
	switch d.format {
	case FormatRaw:
		payload = append(dst[:0], frame...)
	case FormatJSON:
		if !json.Valid(frame) {
			return "", dst, DropMalformed, errInvalidJSON
		}
		if d.static == "" {
			if dev, err = jsonDevice(frame, d.path); err != nil {
				return "", dst, DropBadDevice, err
			}
		}
		payload = append(dst[:0], frame...)
	case FormatLine:
		if dev, payload, err = d.line.parse(frame, dst[:0]); err != nil {
			return "", payload, DropMalformed, err
		}
	default:
		return "", dst, DropMalformed, fmt.Errorf("unknown format %q", d.format)
	}
	if d.static != "" {
		return d.static, payload, dropNone, nil
	}
	if len(dev) == 0 {
		return "", payload, DropBadDevice, errNoDevice
	}
	if string(dev) == d.last { // compared without allocating
		return d.last, payload, dropNone, nil
	}
	s := string(dev)
	if err := wal.ValidateDeviceID(s); err != nil {
		return "", payload, DropBadDevice, err
	}
	d.last = s
	return s, payload, dropNone, nil
}
