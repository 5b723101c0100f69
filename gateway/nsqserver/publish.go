package nsqserver

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/tidwall/gjson"

	"edgeq/wal"
)

// deviceOf names the device of a message published to topic: the topic's
// suffix for <prefix>.<device>, else the body's JSON field DeviceField.
func (s *Server) deviceOf(topic, body []byte) (string, *Error) {
	p := s.cfg.TelemetryPrefix
	var device string
	switch {
	case string(topic) == p:
		v := gjson.GetBytes(body, s.cfg.DeviceField)
		if v.Type != gjson.String && v.Type != gjson.Number {
			return "", softf("E_BAD_MESSAGE", "no device ID at %q in the JSON body (publish to %q.<device>, or include the field)", s.cfg.DeviceField, p)
		}
		device = v.String()
	case len(topic) > len(p)+1 && string(topic[:len(p)]) == p && topic[len(p)] == '.':
		device = string(topic[len(p)+1:])
	default:
		return "", softf("E_BAD_TOPIC", "topic %q is not served: publish to %q or %q.<device>", topic, p, p)
	}
	if err := wal.ValidateDeviceID(device); err != nil {
		return "", softf("E_BAD_MESSAGE", "device ID %q: %v", device, err)
	}
	return device, nil
}

// publish stores the messages of a PUB or MPUB and answers OK once every
// one is durable, in the connection's response order. A message without a
// device ID refuses the whole command before anything is stored; a storage
// error answers E_PUB_FAILED / E_MPUB_FAILED (with MPUB, others of the batch
// may be stored).
func (c *conn) publish(topic []byte, bodies [][]byte, what string) error {
	recs := make([]wal.Record, len(bodies))
	for i, b := range bodies {
		dev, perr := c.s.deviceOf(topic, b)
		if perr != nil {
			c.s.stats.PubErrors.Add(uint64(len(bodies)))
			if len(bodies) > 1 {
				perr.Desc = fmt.Sprintf("message %d: %s", i, perr.Desc)
			}
			return perr
		}
		recs[i] = wal.Record{Device: dev, Source: "nsq", Payload: bytes.Clone(b)}
	}
	r := c.slot()
	if r == nil {
		return nil
	}
	var mu sync.Mutex
	left := len(recs)
	var firstErr error
	s := c.s
	for i := range recs {
		s.ingest.AppendAsync(&recs[i], func(_ wal.Position, err error) {
			if err != nil {
				s.stats.PubErrors.Add(1)
			} else {
				s.stats.Published.Add(1)
			}
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			left--
			done, ferr := left == 0, firstErr
			mu.Unlock()
			if !done {
				return
			}
			if ferr != nil {
				code := "E_PUB_FAILED"
				if what == "MPUB" {
					code = "E_MPUB_FAILED"
				}
				e := softf(code, "%s failed %v", what, ferr)
				s.stats.countError(code)
				c.fill(r, FrameError, []byte(e.Error()))
				return
			}
			c.fill(r, FrameResponse, okBytes)
		})
	}
	return nil
}

var okBytes = []byte("OK")
